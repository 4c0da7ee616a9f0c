#pragma once
// Launchers of FP8 activation quantisation, on its own or as the output stage
// of a norm or SwiGLU (see launch/dense.h for the conventions of these headers).

#include <cuda_runtime.h>

#include <cstdint>

namespace hyllm::cuda {

// Where an FP8 activation goes (ops.h Fp8Activation): codes q [rows, cols],
// and either group scales scale[group * rows + row] (dynamic: group_scales
// true) or one scale read from static_scale.
struct Fp8Out {
  uint8_t* q = nullptr;
  float* scale = nullptr;              // dynamic: [ceil(cols/128), rows]
  const float* static_scale = nullptr;  // static: [1]
  bool group_scales = false;
  int rows = 0;
  int cols = 0;
  bool enabled() const { return q != nullptr; }  // host side (kernels test q)
};

struct QuantizeFp8Params {
  const uint16_t* x = nullptr;  // column slice
  int64_t x_stride = 0;
  Fp8Out out;
};
void launch_quantize_fp8(const QuantizeFp8Params& p, cudaStream_t stream);

// The scales of a block-FP8 GEMM of `ld` rows over an activation of `rows`
// rows (ld a multiple of kFp8BlockRowMultiple: below rows for a split, above
// for a GEMM into the activation's row room): dst[g * ld + t] = t < rows ?
// src[g * rows + t] : 0 for every group g (Fp8Out's layout at pitch ld).
// With room_codes, the codes of rows [rows, ld) (room_bytes bytes) are zeroed
// too, so that the GEMM's extra rows read codes something wrote and give
// zeros.
struct PackGroupScalesParams {
  const float* src = nullptr;  // [groups, rows]
  float* dst = nullptr;        // [groups, ld]
  int rows = 0;
  int groups = 0;
  int ld = 0;
  uint8_t* room_codes = nullptr;  // optional
  int64_t room_bytes = 0;
};
void launch_pack_group_scales(const PackGroupScalesParams& p, cudaStream_t stream);

// out[m, n] = sum_k x[m, k] W[n, k] for few rows (decode): e4m3 operands with
// the scales of ops.h's linear (block or per-tensor), the weights streamed
// once (fp8_gemv_tma.cu; fp8_gemv.cu where fp8_gemv_uses_tma says no or TMA
// cannot address the operands). Any shape; rows
// beyond kFp8GemvRowsPerPass in chunks of that many, each chunk reading the
// weights again.
inline constexpr int kFp8GemvRowsPerPass = 32;
struct Fp8GemvParams {
  const uint8_t* w = nullptr;       // [N, K] e4m3
  const float* w_scale = nullptr;   // block: [ceil(N/128), ceil(K/128)]; tensor: [1]
  const uint8_t* x = nullptr;       // [M, K] e4m3
  const float* x_scale = nullptr;   // block: [ceil(K/128), x_scale_ld]; tensor: [1]
  bool block_scales = true;
  void* out = nullptr;              // [M, N] bf16 or f32
  bool out_f32 = false;
  int M = 0;
  int N = 0;
  int K = 0;
  // False sends every shape to the register-tile kernel (bench_cuda_gemm
  // times both kernels to place kFp8GemvTmaMinWeightBytes).
  bool use_tma = true;
  // Block scales' row pitch when x is a slice of rows of a larger
  // activation (0: M).
  int x_scale_ld = 0;
  __host__ __device__ int x_scale_pitch() const { return x_scale_ld != 0 ? x_scale_ld : M; }
  // The TMA kernel's launch as given instead of as planned (bench_cuda_gemm
  // sweeps them): blocks per 128-row block, and shared memory per block
  // (at least what the kernel needs; more only spreads the blocks). 0: planned.
  int tma_cluster = 0;
  size_t tma_smem = 0;
};
void launch_fp8_gemv(const Fp8GemvParams& p, int num_sms, cudaStream_t stream);
// Weights from which the TMA-fed kernel streams faster than the register-tile
// kernel (below it, its fixed cost per block outweighs its deeper pipeline).
inline constexpr int64_t kFp8GemvTmaMinWeightBytes = int64_t{16} << 20;
// Rows up to which the register-tile kernel keeps the weights below
// kFp8GemvTmaMinWeightBytes; more rows take the TMA kernel whatever the
// weight (the register tiles' third and fourth token tiles cost more than the
// TMA kernel's fixed cost per block, docs/BENCHMARKS.md).
inline constexpr int kFp8GemvRegisterMaxRows = 16;
// Whether launch_fp8_gemv streams an M x K by N x K product through the TMA
// kernel (where TMA can address it).
inline constexpr bool fp8_gemv_uses_tma(int64_t m, int64_t n, int64_t k) {
  return n * k >= kFp8GemvTmaMinWeightBytes || m > kFp8GemvRegisterMaxRows;
}
// The most rows for which the linear prefers fp8_gemv to cuBLASLt, per scale
// format (cuBLASLt has no block-scaled algorithm below 4 rows, and up to 32
// rows its block-scaled kernels read the weights slower than fp8_gemv's,
// bench_cuda_gemm and the decode step; with per-tensor scales it streams the
// weights well from one row on).
inline constexpr int kFp8GemvMaxRowsBlock = 32;
inline constexpr int kFp8GemvMaxRowsTensor = 0;
// cuBLASLt's block-scaled FP8 algorithms on sm_90a take only row counts that
// are multiples of this (bench_cuda_gemm --probe-rows lists them).
inline constexpr int kFp8BlockRowMultiple = 4;

}  // namespace hyllm::cuda
