#pragma once
// Collectives between CPU backends whose ranks are threads of one process
// (tensor parallelism in CI and on hosts without GPUs). The CPU backend's
// device memory is host memory, so a rank reads the other ranks' tensors
// directly; the tensors of different ranks must be distinct memory.

#include <memory>
#include <vector>

#include "backend/communicator.h"

namespace hyllm {

// One communicator per rank 0..size-1 of a new group; give rank r's to the
// backend whose thread runs rank r (Backend::set_communicator).
std::vector<std::shared_ptr<Communicator>> make_cpu_communicators(int size);

}  // namespace hyllm
