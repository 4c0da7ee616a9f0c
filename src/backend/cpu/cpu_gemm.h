#pragma once
// Matrix products of the CPU backend. Weights stay in their stored type
// (bf16 or e4m3); each call converts the tiles it needs on the fly, so there
// is no second, converted copy of the weights in memory.

#include <cstdint>

namespace hyllm::cpu {

// y[m, n] = sum_k x[m, k] * W[n, k] (row-major; y has row stride ldy).
// fp32 accumulation. Small M runs a vectorised bf16 GEMV that reads every
// weight once; larger M converts tiles of W to f32 and calls OpenBLAS sgemm.
// Parallel over n on the global pool: do not call from inside a pool task.
void gemm_bf16_weight(const float* x, int64_t M, int64_t K, const uint16_t* W, int64_t N, float* y,
                      int64_t ldy);

// y[m, n] = sum_k x[m, k] * W[n, k] for e4m3 weights and e4m3-valued x given
// as doubles, computed exactly (every partial sum of fp8 products is exact in
// double when K <= 65536). Used by the fp8 linear formats; kb_size > 0 splits K
// into blocks of that many columns and writes one product per block:
// y[(m * num_kb + kb) * N + n].
void gemm_fp8_exact(const double* xq, int64_t M, int64_t K, const uint8_t* Wq, int64_t N, int64_t kb_size,
                    double* y);

// Makes OpenBLAS single-threaded (once per process): the kernels parallelise
// over their own work items and call BLAS from inside pool tasks.
void blas_single_threaded();

// Rows at or below which gemm_bf16_weight uses the GEMV kernel.
int64_t gemv_max_rows();

}  // namespace hyllm::cpu
