#pragma once
// Tensor-parallel collectives between the GPUs of one host, through NCCL.
// CUDA-free so that the executor can include it.

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"

namespace hyllm {

// One communicator per CUDA backend, rank r for cuda_backends[r], each on a
// different GPU; the caller gives communicator r to backend r
// (Backend::set_communicator). The collectives are enqueued on each backend's
// stream, so a CUDA graph captured there records them; a rank's call returns
// once its part is enqueued. Call from one thread, before the rank threads
// start (it sets NCCL's environment defaults, util/env.h).
std::vector<std::shared_ptr<Communicator>> make_nccl_communicators(const std::vector<Backend*>& cuda_backends);

}  // namespace hyllm
