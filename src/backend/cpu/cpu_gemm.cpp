#include "backend/cpu/cpu_gemm.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_common.h"

namespace hyllm::cpu {
namespace {

bool have_avx2() {
  static const bool v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return v;
}

__attribute__((target("avx2,fma"))) inline __m256 load_bf16x8(const uint16_t* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// Every dot product of this file -- an output element y[m, n] of the GEMM, a
// score of dot_rows_bf16 -- is computed by the same arithmetic whichever
// microkernel (rows of x by rows of W) produces it: one 8-lane fp32
// accumulator fed by FMAs over k = 0, 8, 16, ... in order, a fixed horizontal
// sum, then the K % 8 tail added by scalar FMAs in k order. So a row's result
// does not depend on how many rows share the call, on the tiling or on the
// thread split (batch invariance, see cpu_kernels.h).
template <int MR, int NR>
__attribute__((target("avx2,fma"), always_inline)) inline void micro_avx2(const float* const* xr,
                                                                          const uint16_t* const* wr, int64_t K,
                                                                          float* const* yr) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  const int64_t K8 = K / 8 * 8;
  for (int64_t k = 0; k < K8; k += 8) {
    __m256 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_ps(xr[i] + k);
    for (int j = 0; j < NR; ++j) {
      const __m256 wv = load_bf16x8(wr[j] + k);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(wv, xv[i], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      __m128 s = _mm_set_ss(hsum(acc[i][j]));
      for (int64_t k = K8; k < K; ++k) s = _mm_fmadd_ss(_mm_set_ss(bf(wr[j][k])), _mm_set_ss(xr[i][k]), s);
      yr[i][j] = _mm_cvtss_f32(s);
    }
  }
}

// micro_avx2 on rows m.. of x and n.. of W, output y[m + i, n + j].
template <int MR, int NR>
__attribute__((target("avx2,fma"), always_inline)) inline void tile_avx2(const float* x, int64_t K,
                                                                         const uint16_t* W, int64_t m, int64_t n,
                                                                         float* y, int64_t ldy) {
  const float* xr[MR];
  const uint16_t* wr[NR];
  float* yr[MR];
  for (int i = 0; i < MR; ++i) {
    xr[i] = x + (m + i) * K;
    yr[i] = y + (m + i) * ldy + n;
  }
  for (int j = 0; j < NR; ++j) wr[j] = W + (n + j) * K;
  micro_avx2<MR, NR>(xr, wr, K, yr);
}

// Weight rows [n0, n1) against x rows [m0, m1): pairs of x rows by 4 weight
// rows (each converted weight vector feeds two FMAs); a lone last row takes 8
// weight rows at a time so that a single-row GEMV keeps 8 FMA chains busy.
__attribute__((target("avx2,fma"))) void block_avx2(const float* x, int64_t m0, int64_t m1, int64_t K,
                                                    const uint16_t* W, int64_t n0, int64_t n1, float* y,
                                                    int64_t ldy) {
  const int64_t n4 = n0 + (n1 - n0) / 4 * 4, m2 = m0 + (m1 - m0) / 2 * 2;
  for (int64_t n = n0; n < n4; n += 4) {
    for (int64_t m = m0; m < m2; m += 2) tile_avx2<2, 4>(x, K, W, m, n, y, ldy);
  }
  if (m2 < m1) {
    int64_t n = n0;
    for (; n + 8 <= n4; n += 8) tile_avx2<1, 8>(x, K, W, m2, n, y, ldy);
    for (; n < n4; n += 4) tile_avx2<1, 4>(x, K, W, m2, n, y, ldy);
  }
  for (int64_t n = n4; n < n1; ++n) {
    for (int64_t m = m0; m < m1; ++m) tile_avx2<1, 1>(x, K, W, m, n, y, ldy);
  }
}

__attribute__((target("avx2,fma"))) void dot_rows_avx2(const float* x, const uint16_t* const* rows, int64_t count,
                                                       int64_t K, float* out) {
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    float* yr[1] = {out + j};
    micro_avx2<1, 8>(&x, rows + j, K, yr);
  }
  for (; j < count; ++j) {
    float* yr[1] = {out + j};
    micro_avx2<1, 1>(&x, rows + j, K, yr);
  }
}

// The same per-element arithmetic without AVX2 (8 partial sums over k in
// steps of 8, the same pairwise horizontal sum, then the tail), for machines
// without it; results agree with the AVX2 path only within one machine's runs.
float dot_generic(const float* xr, const uint16_t* wr, int64_t K) {
  float lane[8] = {};
  const int64_t K8 = K / 8 * 8;
  for (int64_t k = 0; k < K8; k += 8) {
    for (int l = 0; l < 8; ++l) lane[l] = std::fma(bf(wr[k + l]), xr[k + l], lane[l]);
  }
  float q[4];
  for (int l = 0; l < 4; ++l) q[l] = lane[l] + lane[l + 4];
  float s = (q[0] + q[2]) + (q[1] + q[3]);
  for (int64_t k = K8; k < K; ++k) s = std::fma(bf(wr[k]), xr[k], s);
  return s;
}

void block_generic(const float* x, int64_t m0, int64_t m1, int64_t K, const uint16_t* W, int64_t n0, int64_t n1,
                   float* y, int64_t ldy) {
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t m = m0; m < m1; ++m) y[m * ldy + n] = dot_generic(x + m * K, W + n * K, K);
  }
}

__attribute__((target("avx2,fma"))) void bf16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16x8(src + i));
  for (; i < n; ++i) dst[i] = bf(src[i]);
}

std::array<double, 256> make_e4m3_table() {
  std::array<double, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = f8e4m3_to_f32(static_cast<uint8_t>(i));
  return t;
}

}  // namespace

void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  if (have_avx2()) {
    bf16_to_f32_avx2(src, dst, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = bf(src[i]);
}

void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf(src[i]);
}

// Two thread pools on the same cores only fight, so OpenBLAS gets one thread.
void blas_single_threaded() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

void gemm_bf16_weight(const float* x, int64_t M, int64_t K, const uint16_t* W, int64_t N, float* y,
                      int64_t ldy) {
  if (M == 0 || N == 0) return;
  // A task owns a tile of weight rows (about 64 KiB of bf16, so it stays in
  // L2) and passes every block of x rows (about 128 KiB of f32) over it: the
  // weights are read from memory once per call whatever M is.
  const int64_t tile_rows = std::max<int64_t>(8, (64 * 1024) / (2 * std::max<int64_t>(1, K)) / 8 * 8);
  const int64_t block_rows = std::max<int64_t>(2, (128 * 1024) / (4 * std::max<int64_t>(1, K)) / 2 * 2);
  const int64_t tiles = (N + tile_rows - 1) / tile_rows;
  const bool avx2 = have_avx2();
  parallel(tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n0 = t * tile_rows, n1 = std::min(N, n0 + tile_rows);
      for (int64_t m0 = 0; m0 < M; m0 += block_rows) {
        const int64_t m1 = std::min(M, m0 + block_rows);
        if (avx2) {
          block_avx2(x, m0, m1, K, W, n0, n1, y, ldy);
        } else {
          block_generic(x, m0, m1, K, W, n0, n1, y, ldy);
        }
      }
    }
  });
}

namespace {
__attribute__((target("avx2,fma"))) void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}
}  // namespace

void axpy(float a, const float* x, float* y, int64_t n) {
  if (have_avx2()) {
    axpy_avx2(a, x, y, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

void dot_rows_bf16(const float* x, const uint16_t* const* rows, int64_t count, int64_t K, float* out) {
  if (have_avx2()) {
    dot_rows_avx2(x, rows, count, K, out);
    return;
  }
  for (int64_t j = 0; j < count; ++j) out[j] = dot_generic(x, rows[j], K);
}

void gemm_fp8_exact(const double* xq, int64_t M, int64_t K, const uint8_t* Wq, int64_t N, int64_t kb_size,
                    double* y) {
  if (M == 0 || N == 0) return;
  blas_single_threaded();
  static const std::array<double, 256> kE4m3 = make_e4m3_table();
  const int64_t kb = kb_size > 0 ? kb_size : K;
  const int64_t num_kb = (K + kb - 1) / kb;
  constexpr int64_t kTile = 64;
  const int64_t tiles = (N + kTile - 1) / kTile;
  parallel(tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<double> wt(static_cast<size_t>(kTile * K));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n0 = t * kTile, nb = std::min(kTile, N - n0);
      for (int64_t i = 0; i < nb * K; ++i) wt[i] = kE4m3[Wq[n0 * K + i]];
      for (int64_t j = 0; j < num_kb; ++j) {
        const int64_t k0 = j * kb, kl = std::min(kb, K - k0);
        // Block j of every row m lands at y[(m * num_kb + j) * N + n].
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(M), static_cast<blasint>(nb),
                    static_cast<blasint>(kl), 1.0, xq + k0, static_cast<blasint>(K), wt.data() + k0,
                    static_cast<blasint>(K), 0.0, y + j * N + n0, static_cast<blasint>(num_kb * N));
      }
    }
  });
}

}  // namespace hyllm::cpu
