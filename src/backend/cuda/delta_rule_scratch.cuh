#pragma once
// The scratch layout shared by the gated delta rule's kernels (recurrent in
// gated_delta_rule.cu, chunked in chunk_prepare.cu and chunked_delta_rule.cu).
// Included only by .cu files. Every region starts on a 16-byte boundary so that the chunked
// kernels can stage rows with 16-byte asynchronous copies.

#include "backend/cuda/launch/gdn.h"

namespace hyllm::cuda {

// Chunk length of the WY form (QWEN35.md 4.2) and the token count from
// which a sequence takes the chunked path. Shorter sequences, decode tokens
// among them, always run the recurrence, so a decode token rounds the same
// whether its step also carries a long prefill or not.
constexpr int kDeltaChunk = 64;
constexpr int kChunkedFromTokens = 64;
// The chunked kernels pad Dv to a multiple of this, the state kernel's
// smaller value-dimension block, and Dk to one of two compiled widths.
constexpr int kDeltaVBlock = 32;

struct DeltaRuleScratch {
  float* qn;     // [T, Hk, Dk]  L2-normalised q / sqrt(Dk)
  float* kn;     // [T, Hk, Dk]  L2-normalised k
  float* kq;     // [T, Hk]      k.q
  float* decay;  // [T, Hv]      exp(g)
  float* beta;   // [T, Hv]
  float* g;      // [T, Hv]      log decay
  // Chunked path only (null otherwise). The tensor-core operands whose
  // entries lie in [-1, 1] are stored as fp16 bits: its 10-bit mantissa is
  // TF32's (ties to even, and fewer bits below 2^-14: errors under 2^-25),
  // and fp16 values are exact TF32 values, in half the bytes of fp32. The bounds: q and k are
  // normalised; P's entries are decayed q.k; W's rows have norm <= 1, as W
  // is the WY form of a product of contractions (beta in (0, 1), |k| <= 1).
  uint16_t* q16;  // [T, Hk, dk_pad]  qn, zero past Dk (the preparation kernel)
  uint16_t* k16;  // [T, Hk, dk_pad]  kn, zero past Dk
  // Written by the chunk preparation:
  uint16_t* w;    // [T, Hv, dk_pad]  rows of W = (I + A)^-1 diag(beta gamma) K
  float* u;       // [T, Hv, dv_pad]  rows of U~ = (I + A)^-1 diag(beta) V
  uint16_t* p;    // [T, Hv, 64]      rows of (Q K^T) * exp(G_i - G_j), j <= i
  float* gcum;    // [T, Hv]          G_i, g summed from the chunk start
  int dk_pad = 0;
  int dv_pad = 0;
};

inline int64_t align4(int64_t floats) { return (floats + 3) / 4 * 4; }

// Dk padded to the chunked kernels' compiled width; 0 when they cannot run it.
inline int chunked_dk_pad(int k_dim) { return k_dim <= 64 ? 64 : k_dim <= 128 ? 128 : 0; }
inline int chunked_dv_pad(int v_dim) { return (v_dim + kDeltaVBlock - 1) / kDeltaVBlock * kDeltaVBlock; }

// Whether this call runs the chunked kernels for its long sequences.
inline bool use_chunked(const GatedDeltaRuleParams& p) {
  if (!p.chunked || chunked_dk_pad(p.k_dim) == 0 || chunked_dv_pad(p.v_dim) > 128) return false;
  return p.max_query_len == 0 || p.max_query_len >= kChunkedFromTokens;
}

// Floats holding n fp16 values, rounded up so that every region starts on a
// 16-byte boundary.
inline int64_t halves_as_floats(int64_t halves) { return align4((halves + 1) / 2); }

inline size_t delta_rule_scratch_floats(const GatedDeltaRuleParams& p, bool chunked) {
  const int64_t T = p.tokens, Hk = p.num_k_heads, Hv = p.num_v_heads;
  int64_t n = 2 * align4(T * Hk * p.k_dim) + align4(T * Hk) + 3 * align4(T * Hv);
  if (chunked) {
    const int64_t dk_pad = chunked_dk_pad(p.k_dim);
    n += 2 * halves_as_floats(T * Hk * dk_pad) + halves_as_floats(T * Hv * dk_pad) +
         align4(T * Hv * chunked_dv_pad(p.v_dim)) + halves_as_floats(T * Hv * kDeltaChunk) + align4(T * Hv);
  }
  return static_cast<size_t>(n);
}

inline DeltaRuleScratch carve_delta_rule_scratch(const GatedDeltaRuleParams& p, void* scratch, bool chunked) {
  float* f = static_cast<float*>(scratch);
  const int64_t T = p.tokens, Hk = p.num_k_heads, Hv = p.num_v_heads;
  DeltaRuleScratch s{};
  auto take = [&f](int64_t n) {
    float* r = f;
    f += align4(n);
    return r;
  };
  auto take16 = [&f](int64_t halves) {
    uint16_t* r = reinterpret_cast<uint16_t*>(f);
    f += halves_as_floats(halves);
    return r;
  };
  s.qn = take(T * Hk * p.k_dim);
  s.kn = take(T * Hk * p.k_dim);
  s.kq = take(T * Hk);
  s.decay = take(T * Hv);
  s.beta = take(T * Hv);
  s.g = take(T * Hv);
  if (chunked) {
    s.dk_pad = chunked_dk_pad(p.k_dim);
    s.dv_pad = chunked_dv_pad(p.v_dim);
    s.q16 = take16(T * Hk * s.dk_pad);
    s.k16 = take16(T * Hk * s.dk_pad);
    s.w = take16(T * Hv * s.dk_pad);
    s.u = take(T * Hv * s.dv_pad);
    s.p = take16(T * Hv * kDeltaChunk);
    s.gcum = take(T * Hv);
  }
  return s;
}

// The chunked path's two kernels (chunk_prepare.cu, chunked_delta_rule.cu),
// after the shared per-token preparation.
void launch_chunked_delta_rule(const GatedDeltaRuleParams& p, const DeltaRuleScratch& s, cudaStream_t stream);

}  // namespace hyllm::cuda
