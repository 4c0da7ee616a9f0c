#include "backend/cpu/cpu_gemm.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
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

// Rows [n0, n1) of W against all M rows of x; 4 weight rows at a time so that
// each weight byte is read from memory once per call.
__attribute__((target("avx2,fma"))) void gemv_avx2(const float* x, int64_t M, int64_t K, const uint16_t* W,
                                                   int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const int64_t K16 = K / 16 * 16;
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const uint16_t* w[4] = {W + n * K, W + (n + 1) * K, W + (n + 2) * K, W + (n + 3) * K};
    int64_t m = 0;
    // Two rows of x per pass: each converted weight vector feeds two FMAs.
    for (; m + 2 <= M; m += 2) {
      const float* xa = x + m * K;
      const float* xb = xa + K;
      __m256 acc[4][2];
      for (auto& a : acc) a[0] = a[1] = _mm256_setzero_ps();
      for (int64_t k = 0; k + 8 <= K; k += 8) {
        __m256 va = _mm256_loadu_ps(xa + k), vb = _mm256_loadu_ps(xb + k);
        for (int r = 0; r < 4; ++r) {
          __m256 wv = load_bf16x8(w[r] + k);
          acc[r][0] = _mm256_fmadd_ps(wv, va, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(wv, vb, acc[r][1]);
        }
      }
      for (int r = 0; r < 4; ++r) {
        float sa = hsum(acc[r][0]), sb = hsum(acc[r][1]);
        for (int64_t k = K / 8 * 8; k < K; ++k) {
          sa += bf(w[r][k]) * xa[k];
          sb += bf(w[r][k]) * xb[k];
        }
        y[m * ldy + n + r] = sa;
        y[(m + 1) * ldy + n + r] = sb;
      }
    }
    for (; m < M; ++m) {
      const float* xm = x + m * K;
      __m256 acc[4][2];
      for (auto& a : acc) a[0] = a[1] = _mm256_setzero_ps();
      for (int64_t k = 0; k < K16; k += 16) {
        __m256 x0 = _mm256_loadu_ps(xm + k), x1 = _mm256_loadu_ps(xm + k + 8);
        for (int r = 0; r < 4; ++r) {
          acc[r][0] = _mm256_fmadd_ps(load_bf16x8(w[r] + k), x0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(load_bf16x8(w[r] + k + 8), x1, acc[r][1]);
        }
      }
      for (int r = 0; r < 4; ++r) {
        float s = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
        for (int64_t k = K16; k < K; ++k) s += bf(w[r][k]) * xm[k];
        y[m * ldy + n + r] = s;
      }
    }
  }
  for (; n < n1; ++n) {
    const uint16_t* wr = W + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const float* xm = x + m * K;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      for (int64_t k = 0; k < K16; k += 16) {
        a0 = _mm256_fmadd_ps(load_bf16x8(wr + k), _mm256_loadu_ps(xm + k), a0);
        a1 = _mm256_fmadd_ps(load_bf16x8(wr + k + 8), _mm256_loadu_ps(xm + k + 8), a1);
      }
      float s = hsum(_mm256_add_ps(a0, a1));
      for (int64_t k = K16; k < K; ++k) s += bf(wr[k]) * xm[k];
      y[m * ldy + n] = s;
    }
  }
}

void gemv_generic(const float* x, int64_t M, int64_t K, const uint16_t* W, int64_t n0, int64_t n1, float* y,
                  int64_t ldy) {
  for (int64_t n = n0; n < n1; ++n) {
    const uint16_t* wr = W + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const float* xm = x + m * K;
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += bf(wr[k]) * xm[k];
      y[m * ldy + n] = s;
    }
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

int64_t gemv_max_rows() { return 16; }

void gemm_bf16_weight(const float* x, int64_t M, int64_t K, const uint16_t* W, int64_t N, float* y,
                      int64_t ldy) {
  if (M == 0 || N == 0) return;
  if (M <= gemv_max_rows()) {
    // About 64 KiB of weights per task keeps scheduling overhead small.
    const int64_t min_rows = std::max<int64_t>(4, (32 * 1024) / std::max<int64_t>(1, K) / 4 * 4);
    parallel(N, min_rows, [&](int64_t n0, int64_t n1) {
      if (have_avx2()) {
        gemv_avx2(x, M, K, W, n0, n1, y, ldy);
      } else {
        gemv_generic(x, M, K, W, n0, n1, y, ldy);
      }
    });
    return;
  }
  blas_single_threaded();
  // OpenBLAS 0.3.21 runs sgemm about three times slower when N <= 256 (a
  // small-matrix path), so weight tiles hold 512 rows; rows of x are split
  // too when there are fewer tiles than threads.
  constexpr int64_t kTile = 512, kMinRows = 32;
  const int64_t n_tiles = (N + kTile - 1) / kTile;
  const int64_t threads = pool().num_threads();
  const int64_t m_chunks =
      std::max<int64_t>(1, std::min<int64_t>(M / kMinRows, (2 * threads + n_tiles - 1) / n_tiles));
  const int64_t m_step = (M + m_chunks - 1) / m_chunks;
  // Task = (tile, row chunk), tile-major so a thread's consecutive tasks reuse
  // the converted tile.
  parallel(n_tiles * m_chunks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> wt;
    int64_t converted = -1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t tile = t / m_chunks, m0 = (t % m_chunks) * m_step, mt = std::min(m_step, M - m0);
      const int64_t n0 = tile * kTile, nb = std::min(kTile, N - n0);
      if (mt <= 0) continue;
      if (converted != tile) {
        wt.resize(static_cast<size_t>(nb * K));
        bf16_to_f32_row(W + n0 * K, wt.data(), nb * K);
        converted = tile;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(mt), static_cast<blasint>(nb),
                  static_cast<blasint>(K), 1.0f, x + m0 * K, static_cast<blasint>(K), wt.data(),
                  static_cast<blasint>(K), 0.0f, y + m0 * ldy + n0, static_cast<blasint>(ldy));
    }
  });
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
