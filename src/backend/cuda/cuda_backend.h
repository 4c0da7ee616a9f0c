#pragma once
// The CUDA backend's factory. This header is CUDA-free so that apps can
// include it; everything that touches the CUDA runtime stays in this folder.

#include <memory>

#include "backend/backend.h"

namespace hyllm {

// Number of visible CUDA devices; 0 when there is no driver or no GPU.
int cuda_device_count();
std::unique_ptr<Backend> make_cuda_backend(int device_index = 0);

}  // namespace hyllm
