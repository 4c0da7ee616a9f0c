#pragma once
// The CPU backend: host memory and the reference kernels. It is what CI runs
// and what every other backend is checked against.

#include <memory>

#include "backend/backend.h"

namespace hyllm {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace hyllm
