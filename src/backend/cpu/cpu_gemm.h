#pragma once
// Matrix products of the CPU backend. Weights stay in their stored type
// (bf16 or e4m3); each call converts the tiles it needs on the fly, so there
// is no second, converted copy of the weights in memory.

#include <cstdint>

namespace hyllm::cpu {

// y[m, n] = sum_k x[m, k] * W[n, k] (row-major; y has row stride ldy).
// fp32 accumulation in a fixed order per element (see dot_rows_bf16): row m
// of y is bit-identical whatever M is. Weights are converted on the fly and
// read from memory once per call. Parallel over n on the global pool: do not
// call from inside a pool task.
void gemm_bf16_weight(const float* x, int64_t M, int64_t K, const uint16_t* W, int64_t N, float* y,
                      int64_t ldy);

// y[m, n] = sum_k x[m, k] * W[n, k] for e4m3 weights and e4m3-valued x given
// as doubles, computed exactly (every partial sum of fp8 products is exact in
// double when K <= 65536). Used by the fp8 linear formats; kb_size > 0 splits K
// into blocks of that many columns and writes one product per block:
// y[(m * num_kb + kb) * N + n].
void gemm_fp8_exact(const double* xq, int64_t M, int64_t K, const uint8_t* Wq, int64_t N, int64_t kb_size,
                    double* y);

// y[i] = fma(a, x[i], y[i]) for n elements (one rounding per element).
void axpy(float a, const float* x, float* y, int64_t n);

// Makes OpenBLAS single-threaded (once per process): the kernels parallelise
// over their own work items and call BLAS from inside pool tasks.
void blas_single_threaded();

// out[j] = sum_k x[k] * rows[j][k] for count bf16 rows of K elements, with
// exactly the per-element arithmetic of gemm_bf16_weight: one 8-lane fp32
// accumulator over k in steps of 8, a fixed horizontal sum, then the K % 8
// tail in order. Single-threaded (callable from pool tasks).
void dot_rows_bf16(const float* x, const uint16_t* const* rows, int64_t count, int64_t K, float* out);

}  // namespace hyllm::cpu
