#pragma once
// The bf16 linear for a few rows and a narrow output (launch side; see
// bf16_gemv.cu). Plain device pointers: includable from .cu files.

#include <cuda_runtime.h>

#include <cstdint>

namespace hyllm::cuda {

// cuBLASLt runs these shapes as a split-K GEMM plus a reduction kernel (two
// launches, tiles of at least 8 rows) and streams their weights well below
// the copy rate; wider outputs are left to it, which streams those near it.
inline constexpr int kBf16GemvMaxRows = 8;
inline constexpr int64_t kBf16GemvMaxOut = 4096;
// x is staged in shared memory: M * K * 2 bytes at most this.
inline constexpr int64_t kBf16GemvMaxXBytes = 96 * 1024;

struct Bf16GemvParams {
  const uint16_t* x = nullptr;  // [M, K], rows contiguous
  const uint16_t* w = nullptr;  // [N, K]
  void* out = nullptr;          // [M, N], bf16 or f32
  bool out_f32 = false;
  int M = 0, N = 0, K = 0;
};

// Whether the kernel takes this shape: M <= kBf16GemvMaxRows, N <=
// kBf16GemvMaxOut, K a multiple of 8, M * K * 2 <= kBf16GemvMaxXBytes and
// x, w 16-byte aligned.
bool bf16_gemv_fits(const Bf16GemvParams& p);
void launch_bf16_gemv(const Bf16GemvParams& p, cudaStream_t stream);

}  // namespace hyllm::cuda
