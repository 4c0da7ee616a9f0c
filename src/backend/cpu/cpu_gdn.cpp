// The gated delta rule: L2 norm and gating per token, then per (sequence,
// value head) either the token-by-token recurrence or the chunked WY form.
// State per head is Sv = S^T, [Dv][Dk] (ops.h).
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_seq.h"

namespace hyllm {
namespace {

constexpr int64_t kChunk = 64;

// Per-token inputs in fp32: normalised q (scaled) and k per key head, v per
// value head, g and beta per value head.
struct DeltaInputs {
  int64_t Hk, Hv, Dk, Dv;
  std::vector<float> q, k, v, g, beta;
  const float* qt(int64_t t, int64_t kh) const { return q.data() + (t * Hk + kh) * Dk; }
  const float* kt(int64_t t, int64_t kh) const { return k.data() + (t * Hk + kh) * Dk; }
  const float* vt(int64_t t, int64_t vh) const { return v.data() + (t * Hv + vh) * Dv; }
};

DeltaInputs prepare(const GatedDeltaRuleArgs& a) {
  const int64_t T = a.qkv.dim(0), Hk = a.num_k_heads, Hv = a.num_v_heads, Dk = a.k_dim, Dv = a.v_dim;
  DeltaInputs in{Hk, Hv, Dk, Dv, {}, {}, {}, {}, {}};
  in.q.resize(static_cast<size_t>(T * Hk * Dk));
  in.k.resize(in.q.size());
  in.v.resize(static_cast<size_t>(T * Hv * Dv));
  in.g.resize(static_cast<size_t>(T * Hv));
  in.beta.resize(in.g.size());
  std::vector<float> neg_a(static_cast<size_t>(Hv)), dt_bias = cpu::to_floats(a.dt_bias);
  for (int64_t h = 0; h < Hv; ++h) neg_a[h] = -std::exp(cpu::load_float(a.A_log, h));
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(Dk));
  const uint16_t* qkv = a.qkv.data_as<const uint16_t>();
  const int64_t W = a.qkv.dim(1);
  cpu::parallel(T, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const uint16_t* r = qkv + t * W;
      for (int64_t part = 0; part < 2; ++part) {
        for (int64_t h = 0; h < Hk; ++h) {
          const uint16_t* src = r + part * Hk * Dk + h * Dk;
          float* dst = (part == 0 ? in.q.data() : in.k.data()) + (t * Hk + h) * Dk;
          float sum_sq = 0.0f;
          for (int64_t d = 0; d < Dk; ++d) {
            dst[d] = cpu::bf(src[d]);
            sum_sq += dst[d] * dst[d];
          }
          const float inv = 1.0f / std::sqrt(sum_sq + 1e-6f) * (part == 0 ? q_scale : 1.0f);
          for (int64_t d = 0; d < Dk; ++d) dst[d] *= inv;
        }
      }
      cpu::bf16_to_f32_row(r + 2 * Hk * Dk, in.v.data() + t * Hv * Dv, Hv * Dv);
      const uint16_t* ar = cpu::row(a.a, t);
      const uint16_t* br = cpu::row(a.b, t);
      for (int64_t h = 0; h < Hv; ++h) {
        in.g[t * Hv + h] = neg_a[h] * cpu::softplus(cpu::bf(ar[h]) + dt_bias[h]);
        in.beta[t * Hv + h] = cpu::sigmoid(cpu::bf(br[h]));
      }
    }
  });
  return in;
}

inline float dot(const float* x, const float* y, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

// Tokens [t0, t0 + n) of one value head, one at a time.
void recurrent(const DeltaInputs& in, int64_t vh, int64_t t0, int64_t n, float* Sv, uint16_t* out) {
  const int64_t Dk = in.Dk, Dv = in.Dv, kh = vh / (in.Hv / in.Hk);
  for (int64_t t = t0; t < t0 + n; ++t) {
    const float* q = in.qt(t, kh);
    const float* k = in.kt(t, kh);
    const float* v = in.vt(t, vh);
    const float decay = std::exp(in.g[t * in.Hv + vh]), beta = in.beta[t * in.Hv + vh];
    uint16_t* o = out + (t * in.Hv + vh) * Dv;
    for (int64_t j = 0; j < Dv; ++j) {
      float* row = Sv + j * Dk;
      for (int64_t i = 0; i < Dk; ++i) row[i] *= decay;
      const float u = beta * (v[j] - dot(row, k, Dk));
      for (int64_t i = 0; i < Dk; ++i) row[i] += u * k[i];
      o[j] = cpu::to_bf(dot(row, q, Dk));
    }
  }
}

// Scratch of one chunked task.
struct ChunkScratch {
  std::vector<float> K, Q, V, gamma, beta, A, Tm, Wb, Wm, U, M, O;
  explicit ChunkScratch(int64_t Dk, int64_t Dv) {
    for (auto* m : {&K, &Q, &Wb, &Wm}) m->resize(static_cast<size_t>(kChunk * Dk));
    for (auto* m : {&V, &U, &O}) m->resize(static_cast<size_t>(kChunk * Dv));
    for (auto* m : {&A, &Tm, &M}) m->resize(static_cast<size_t>(kChunk * kChunk));
    gamma.resize(kChunk);
    beta.resize(kChunk);
  }
};

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
}

// Tokens [t0, t0 + n) of one value head in chunks of 64 (QWEN35.md 4.2):
//   A[r,s] = beta_r (k_r . k_s) e^(gamma_r - gamma_s) (s < r);  T = (I + A)^-1
//   W = T diag(beta e^gamma) K;  U = T diag(beta) V;  V' = U - W S
//   O = diag(e^gamma) Q S + tril(Q K^T * e^(gamma_r - gamma_s)) V'
//   S' = e^gamma_last S + (diag(e^(gamma_last - gamma)) K)^T V'
// with S = Sv^T.
void chunked(const DeltaInputs& in, int64_t vh, int64_t t0, int64_t n, float* Sv, uint16_t* out,
             ChunkScratch& c) {
  const int64_t Dk = in.Dk, Dv = in.Dv, kh = vh / (in.Hv / in.Hk);
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t L = std::min(kChunk, n - c0);
    float cum = 0.0f;
    for (int64_t r = 0; r < L; ++r) {
      const int64_t t = t0 + c0 + r;
      std::copy(in.kt(t, kh), in.kt(t, kh) + Dk, c.K.data() + r * Dk);
      std::copy(in.qt(t, kh), in.qt(t, kh) + Dk, c.Q.data() + r * Dk);
      std::copy(in.vt(t, vh), in.vt(t, vh) + Dv, c.V.data() + r * Dv);
      cum += in.g[t * in.Hv + vh];
      c.gamma[r] = cum;
      c.beta[r] = in.beta[t * in.Hv + vh];
    }
    // A = strictly lower part of diag(beta) (K K^T) * decay.
    sgemm(false, true, L, L, Dk, 1.0f, c.K.data(), Dk, c.K.data(), Dk, 0.0f, c.A.data(), L);
    for (int64_t r = 0; r < L; ++r) {
      for (int64_t s = 0; s < L; ++s) {
        float& x = c.A[r * L + s];
        x = s < r ? c.beta[r] * x * std::exp(c.gamma[r] - c.gamma[s]) : 0.0f;
      }
    }
    // T = (I + A)^-1 by forward substitution: T[r] = e_r - sum_{s<r} A[r,s] T[s].
    std::fill(c.Tm.begin(), c.Tm.begin() + L * L, 0.0f);
    for (int64_t r = 0; r < L; ++r) {
      float* tr = c.Tm.data() + r * L;
      tr[r] = 1.0f;
      for (int64_t s = 0; s < r; ++s) {
        const float ars = c.A[r * L + s];
        if (ars == 0.0f) continue;
        const float* ts = c.Tm.data() + s * L;
        for (int64_t j = 0; j <= s; ++j) tr[j] -= ars * ts[j];
      }
    }
    // W = T diag(beta e^gamma) K and U = T diag(beta) V (scale rows in place first).
    for (int64_t r = 0; r < L; ++r) {
      const float bk = c.beta[r] * std::exp(c.gamma[r]);
      for (int64_t i = 0; i < Dk; ++i) c.Wb[r * Dk + i] = bk * c.K[r * Dk + i];
      for (int64_t j = 0; j < Dv; ++j) c.U[r * Dv + j] = c.beta[r] * c.V[r * Dv + j];
    }
    sgemm(false, false, L, Dk, L, 1.0f, c.Tm.data(), L, c.Wb.data(), Dk, 0.0f, c.Wm.data(), Dk);
    sgemm(false, false, L, Dv, L, 1.0f, c.Tm.data(), L, c.U.data(), Dv, 0.0f, c.V.data(), Dv);
    // V' = U - W S, kept in c.V.
    sgemm(false, true, L, Dv, Dk, -1.0f, c.Wm.data(), Dk, Sv, Dk, 1.0f, c.V.data(), Dv);
    // O = diag(e^gamma) Q S + M V' with M = tril(Q K^T * decay).
    sgemm(false, true, L, L, Dk, 1.0f, c.Q.data(), Dk, c.K.data(), Dk, 0.0f, c.M.data(), L);
    for (int64_t r = 0; r < L; ++r) {
      for (int64_t s = 0; s < L; ++s) {
        float& x = c.M[r * L + s];
        x = s <= r ? x * std::exp(c.gamma[r] - c.gamma[s]) : 0.0f;
      }
      const float e = std::exp(c.gamma[r]);
      for (int64_t i = 0; i < Dk; ++i) c.Q[r * Dk + i] *= e;
    }
    sgemm(false, true, L, Dv, Dk, 1.0f, c.Q.data(), Dk, Sv, Dk, 0.0f, c.O.data(), Dv);
    sgemm(false, false, L, Dv, L, 1.0f, c.M.data(), L, c.V.data(), Dv, 1.0f, c.O.data(), Dv);
    for (int64_t r = 0; r < L; ++r) {
      uint16_t* o = out + ((t0 + c0 + r) * in.Hv + vh) * Dv;
      for (int64_t j = 0; j < Dv; ++j) o[j] = cpu::to_bf(c.O[r * Dv + j]);
    }
    // Sv = e^gamma_last Sv + V'^T diag(e^(gamma_last - gamma)) K.
    const float last = c.gamma[L - 1];
    for (int64_t r = 0; r < L; ++r) {
      const float e = std::exp(last - c.gamma[r]);
      for (int64_t i = 0; i < Dk; ++i) c.K[r * Dk + i] *= e;
    }
    sgemm(true, false, Dv, Dk, L, 1.0f, c.V.data(), Dv, c.K.data(), Dk, std::exp(last), Sv, Dk);
  }
}

}  // namespace

void CpuKernels::gated_delta_rule(const GatedDeltaRuleArgs& a) {
  const int64_t T = a.qkv.dim(0), Hv = a.num_v_heads, Dk = a.k_dim, Dv = a.v_dim;
  const int64_t S = a.state_indices.dim(0);
  cpu::check_sequences("gated_delta_rule", a.query_start_loc, a.state_indices, T, a.state.dim(0));
  const DeltaInputs in = prepare(a);
  const int32_t* qsl = a.query_start_loc.data_as<const int32_t>();
  const int32_t* idx = a.state_indices.data_as<const int32_t>();
  const int32_t* init = a.has_initial_state.data_as<const int32_t>();
  float* state = a.state.data_as<float>();
  uint16_t* out = a.out.data_as<uint16_t>();
  cpu::blas_single_threaded();
  const bool use_chunks = a.algorithm == DeltaRuleAlgorithm::kChunked;
  cpu::parallel(S * Hv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<ChunkScratch> scratch;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t s = i / Hv, h = i % Hv, t0 = qsl[s], n = qsl[s + 1] - t0;
      if (n == 0) continue;
      float* Sv = state + (int64_t{idx[s]} * Hv + h) * Dv * Dk;
      if (init[s] == 0) std::fill(Sv, Sv + Dv * Dk, 0.0f);
      if (use_chunks) {
        if (scratch.empty()) scratch.emplace_back(Dk, Dv);
        chunked(in, h, t0, n, Sv, out, scratch.front());
      } else {
        recurrent(in, h, t0, n, Sv, out);
      }
    }
  });
}

}  // namespace hyllm
