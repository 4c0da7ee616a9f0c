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

// How the kernel launches an N x K weight for M rows: the blocks splitting
// each 128-row block's K (a cluster) and each block's shared memory
// (bench_cuda_gemm prints it beside the timings).
struct Fp8GemvTmaPlan {
  int cluster = 1;
  size_t smem_bytes = 0;
};
Fp8GemvTmaPlan fp8_gemv_tma_plan(int N, int K, int M);

// Shared memory per block that caps the blocks an SM takes at per_sm, with
// `headroom` bytes of the SM left free (at most what one block may take):
// the padding of the measured plans and of bench_cuda_gemm's sweep.
size_t fp8_gemv_tma_padded_smem(int per_sm, size_t headroom);

}  // namespace hyllm::cuda
