#pragma once
// The TMA-fed FP8 decode linear (fp8_gemv_tma.cu), reached through
// launch_fp8_gemv.

#include <cuda_runtime.h>

#include "backend/cuda/launch/fp8.h"

namespace hyllm::cuda {

// Enqueues the linear and returns true, or returns false (enqueuing nothing)
// when TMA cannot address the weights or the activations (row pitch not a
// multiple of 16 bytes, base not 16-byte aligned).
bool launch_fp8_gemv_tma(const Fp8GemvParams& p, cudaStream_t stream);

}  // namespace hyllm::cuda
