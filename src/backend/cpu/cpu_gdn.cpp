// The gated delta rule: L2 norm and gating per token, then per (sequence,
// value head) the token-by-token recurrence. State per head is Sv = S^T,
// [Dv][Dk] (ops.h).
//
// The CPU backend runs the recurrence for both algorithms: the chunked WY
// form rounds differently from the recurrence and its rounding depends on
// where the chunks start, so a token's output would depend on how the
// scheduler split its sequence into steps (prefill chunk, decode step,
// recompute after preemption). The recurrence gives every token the same
// arithmetic wherever it arrives (batch invariance, cpu_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_seq.h"

namespace hyllm {
namespace {

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

__attribute__((target("avx2,fma"))) inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// One token's update of one state row (Dk floats) and its output element:
//   row *= decay;  u = beta (v_j - row . k);  row += u k;  return row . q
// Dots accumulate in 8 lanes over i in steps of 8, then a fixed horizontal
// sum, then the Dk % 8 tail in order.
__attribute__((target("avx2,fma"))) float update_row_avx2(float* row, const float* k, const float* q, int64_t Dk,
                                                          float decay, float beta, float vj) {
  const int64_t D8 = Dk / 8 * 8;
  const __m256 dv = _mm256_set1_ps(decay);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < D8; i += 8) {
    const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i), dv);
    _mm256_storeu_ps(row + i, r);
    acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i), acc);
  }
  float kv = hsum8(acc);
  for (int64_t i = D8; i < Dk; ++i) {
    row[i] *= decay;
    kv = std::fma(row[i], k[i], kv);
  }
  const float u = beta * (vj - kv);
  const __m256 uv = _mm256_set1_ps(u);
  acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < D8; i += 8) {
    const __m256 r = _mm256_fmadd_ps(uv, _mm256_loadu_ps(k + i), _mm256_loadu_ps(row + i));
    _mm256_storeu_ps(row + i, r);
    acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i), acc);
  }
  float o = hsum8(acc);
  for (int64_t i = D8; i < Dk; ++i) {
    row[i] = std::fma(u, k[i], row[i]);
    o = std::fma(row[i], q[i], o);
  }
  return o;
}

float update_row_generic(float* row, const float* k, const float* q, int64_t Dk, float decay, float beta,
                         float vj) {
  float kv = 0.0f;
  for (int64_t i = 0; i < Dk; ++i) {
    row[i] *= decay;
    kv = std::fma(row[i], k[i], kv);
  }
  const float u = beta * (vj - kv);
  float o = 0.0f;
  for (int64_t i = 0; i < Dk; ++i) {
    row[i] = std::fma(u, k[i], row[i]);
    o = std::fma(row[i], q[i], o);
  }
  return o;
}

// Where one head's states after some of its tokens are copied: after token
// t0 + j for j < num_spec to spec + j * spec_stride (speculative verify), and
// after token t0 + save_len - 1 to save (a prefix-cache save).
struct SavedStates {
  float* spec = nullptr;
  int64_t num_spec = 0;
  int64_t spec_stride = 0;
  float* save = nullptr;
  int64_t save_len = 0;
};

// Tokens [t0, t0 + n) of one value head, one at a time.
void recurrent(const DeltaInputs& in, int64_t vh, int64_t t0, int64_t n, float* Sv, uint16_t* out,
               const SavedStates& saved) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const int64_t Dk = in.Dk, Dv = in.Dv, kh = vh / (in.Hv / in.Hk);
  for (int64_t t = t0; t < t0 + n; ++t) {
    const float* q = in.qt(t, kh);
    const float* k = in.kt(t, kh);
    const float* v = in.vt(t, vh);
    const float decay = std::exp(in.g[t * in.Hv + vh]), beta = in.beta[t * in.Hv + vh];
    uint16_t* o = out + (t * in.Hv + vh) * Dv;
    for (int64_t j = 0; j < Dv; ++j) {
      float* row = Sv + j * Dk;
      const float oj = avx2 ? update_row_avx2(row, k, q, Dk, decay, beta, v[j])
                            : update_row_generic(row, k, q, Dk, decay, beta, v[j]);
      o[j] = cpu::to_bf(oj);
    }
    if (t - t0 < saved.num_spec) std::copy(Sv, Sv + Dv * Dk, saved.spec + (t - t0) * saved.spec_stride);
    if (saved.save != nullptr && t - t0 + 1 == saved.save_len) std::copy(Sv, Sv + Dv * Dk, saved.save);
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
  float* spec = a.spec_states.empty() ? nullptr : a.spec_states.data_as<float>();
  const int64_t K_spec = spec ? a.spec_states.dim(1) : 0;
  const std::vector<cpu::SeqSave> saves =
      cpu::check_saves("gated_delta_rule", a.save, a.query_start_loc, a.state_indices, a.state.dim(0));
  cpu::parallel(S * Hv, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t s = i / Hv, h = i % Hv, t0 = qsl[s], n = qsl[s + 1] - t0;
      if (n == 0) continue;
      float* Sv = state + (int64_t{idx[s]} * Hv + h) * Dv * Dk;
      if (init[s] == 0) std::fill(Sv, Sv + Dv * Dk, 0.0f);
      // a.algorithm is a GPU choice (see the top of this file); the
      // recurrence needs no segments for a save either.
      SavedStates saved;
      if (spec != nullptr && n <= K_spec + 1) {
        saved.spec = spec + ((int64_t{idx[s]} * K_spec) * Hv + h) * Dv * Dk;
        saved.num_spec = n - 1;
        saved.spec_stride = Hv * Dv * Dk;
      }
      if (const cpu::SeqSave& sv = saves[static_cast<size_t>(s)]; sv.slot >= 0) {
        saved.save = state + (int64_t{sv.slot} * Hv + h) * Dv * Dk;
        saved.save_len = sv.len;
      }
      recurrent(in, h, t0, n, Sv, out, saved);
    }
  });
}

void CpuKernels::select_state(const SelectStateArgs& a) {
  const int64_t S = a.state_indices.dim(0), slots = a.live.dim(0), K_spec = a.saved.dim(1);
  const size_t bytes = a.live.nbytes() / static_cast<size_t>(slots);
  const int32_t* idx = a.state_indices.data_as<const int32_t>();
  const int32_t* keep = a.keep.data_as<const int32_t>();
  for (int64_t s = 0; s < S; ++s) {
    if (keep[s] < 0) continue;
    if (keep[s] >= K_spec || idx[s] < 0 || idx[s] >= slots) {
      fail(ErrorCode::kInvalidArgument, "select_state: sequence {} keeps state {} of slot {} ({} saved, {} slots)", s,
           keep[s], idx[s], K_spec, slots);
    }
    const auto* src = static_cast<const std::byte*>(a.saved.data()) + (int64_t{idx[s]} * K_spec + keep[s]) * bytes;
    std::memcpy(static_cast<std::byte*>(a.live.data()) + int64_t{idx[s]} * bytes, src, bytes);
  }
}

}  // namespace hyllm
