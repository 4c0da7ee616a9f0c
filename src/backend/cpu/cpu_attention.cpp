// Gated full attention: q/gate split, q/k norm, partial NeoX RoPE and the
// paged KV write; then causal GQA attention over the paged cache with the
// sigmoid output gate.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {
namespace {

// RMSNorm1p of one head, rounded to bf16, then RoPE on the first rotary_dim
// dims; result rounded to bf16 into dst.
void norm_rope_head(const uint16_t* src, const float* w1p, int64_t D, float eps, const float* cos_v,
                    const float* sin_v, int64_t rotary_dim, float* scratch, uint16_t* dst) {
  float sum_sq = 0.0f;
  for (int64_t d = 0; d < D; ++d) sum_sq += cpu::bf(src[d]) * cpu::bf(src[d]);
  const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(D) + eps);
  for (int64_t d = 0; d < D; ++d) scratch[d] = cpu::bf(cpu::to_bf(cpu::bf(src[d]) * inv * w1p[d]));
  const int64_t half = rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = scratch[i], x2 = scratch[i + half];
    dst[i] = cpu::to_bf(x1 * cos_v[i] - x2 * sin_v[i]);
    dst[i + half] = cpu::to_bf(x2 * cos_v[i] + x1 * sin_v[i]);
  }
  for (int64_t d = rotary_dim; d < D; ++d) dst[d] = cpu::to_bf(scratch[d]);
}

// The e4m3 code of x / scale, saturating (NaN stays NaN): ops.h KvCacheView.
uint8_t kv_code(float x, float scale) {
  const float q = x / scale;
  return f32_to_f8e4m3(q > kFp8E4M3Max ? kFp8E4M3Max : (q < -kFp8E4M3Max ? -kFp8E4M3Max : q));
}

// Writes one head of D bf16 values into a cache row: copied for a bf16
// cache, as e4m3 codes of x / scale for an e4m3 cache.
void write_cache_head(const uint16_t* src, int64_t D, const TensorView& cache, int64_t offset, float scale) {
  if (cache.dtype() == DType::kBF16) {
    std::copy(src, src + D, cache.data_as<uint16_t>() + offset);
    return;
  }
  uint8_t* dst = cache.data_as<uint8_t>() + offset;
  for (int64_t d = 0; d < D; ++d) dst[d] = kv_code(cpu::bf(src[d]), scale);
}

}  // namespace

void CpuKernels::attention_prep(const AttentionPrepArgs& a) {
  const int64_t T = a.positions.dim(0), D = a.head_dim, Hq = a.num_q_heads, Hkv = a.num_kv_heads;
  const int64_t half = a.rotary_dim / 2;
  const int64_t num_slots = a.cache.num_blocks() * a.cache.block_size();
  const int32_t* pos = a.positions.data_as<const int32_t>();
  const int32_t* slots = a.slot_mapping.data_as<const int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    if (slots[t] >= num_slots) {
      fail(ErrorCode::kInvalidArgument, "attention_prep: slot {} of token {} is outside the cache ({} slots)",
           slots[t], t, num_slots);
    }
  }
  std::vector<float> qw = cpu::to_floats(a.q_norm), kw = cpu::to_floats(a.k_norm);
  for (float& v : qw) v += 1.0f;
  for (float& v : kw) v += 1.0f;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = 1.0f / std::pow(a.rope_theta, static_cast<float>(2 * i) / static_cast<float>(a.rotary_dim));
  }
  uint16_t* q_out = a.q_out.data_as<uint16_t>();
  uint16_t* gate_out = a.gate_out.data_as<uint16_t>();
  cpu::parallel(T, 4, [&](int64_t t0, int64_t t1) {
    std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half)),
        scratch(static_cast<size_t>(D));
    std::vector<uint16_t> kbuf(static_cast<size_t>(D));
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(pos[t]) * inv_freq[i];
        cos_v[i] = std::cos(angle);
        sin_v[i] = std::sin(angle);
      }
      const uint16_t* qg = cpu::row(a.q_gate, t);
      for (int64_t h = 0; h < Hq; ++h) {
        norm_rope_head(qg + h * 2 * D, qw.data(), D, a.eps, cos_v.data(), sin_v.data(), a.rotary_dim,
                       scratch.data(), q_out + (t * Hq + h) * D);
        std::copy(qg + h * 2 * D + D, qg + h * 2 * D + 2 * D, gate_out + (t * Hq + h) * D);
      }
      const int64_t slot = slots[t];
      const uint16_t* kr = cpu::row(a.k, t);
      const uint16_t* vr = cpu::row(a.v, t);
      for (int64_t h = 0; h < Hkv; ++h) {
        norm_rope_head(kr + h * D, kw.data(), D, a.eps, cos_v.data(), sin_v.data(), a.rotary_dim, scratch.data(),
                       kbuf.data());
        if (slot < 0) continue;
        write_cache_head(kbuf.data(), D, a.cache.k, (slot * Hkv + h) * D, a.cache.k_scale);
        write_cache_head(vr + h * D, D, a.cache.v, (slot * Hkv + h) * D, a.cache.v_scale);
      }
    }
  });
}

void CpuKernels::paged_attention(const PagedAttentionArgs& a) {
  const int64_t S = a.seq_lens.dim(0), D = a.head_dim, Hq = a.num_q_heads, Hkv = a.num_kv_heads;
  const int64_t group = Hq / Hkv, bs = a.cache.block_size(), max_blocks = a.block_tables.dim(1);
  const int64_t T = a.q.dim(0);
  const int32_t* qsl = a.query_start_loc.data_as<const int32_t>();
  const int32_t* lens = a.seq_lens.data_as<const int32_t>();
  const int32_t* tables = a.block_tables.data_as<const int32_t>();
  const float scale = a.scale > 0.0f ? a.scale : 1.0f / std::sqrt(static_cast<float>(D));
  // Work items: (sequence, kv head, tile of query tokens).
  constexpr int64_t kQTile = 32;
  struct Item {
    int64_t seq, kv_head, q0, q1;
  };
  std::vector<Item> items;
  if (qsl[0] != 0 || qsl[S] != T) {
    fail(ErrorCode::kInvalidArgument, "paged_attention: query_start_loc spans [{}, {}), expected [0, {})", qsl[0],
         qsl[S], T);
  }
  for (int64_t s = 0; s < S; ++s) {
    const int64_t ql = qsl[s + 1] - qsl[s], L = lens[s];
    if (ql < 0 || L < ql || (L + bs - 1) / bs > max_blocks) {
      fail(ErrorCode::kInvalidArgument,
           "paged_attention: sequence {} has {} new of {} tokens, block table holds {} blocks of {}", s, ql, L,
           max_blocks, bs);
    }
    for (int64_t b = 0; b < (L + bs - 1) / bs; ++b) {
      const int32_t blk = tables[s * max_blocks + b];
      if (blk < 0 || blk >= a.cache.num_blocks()) {
        fail(ErrorCode::kInvalidArgument, "paged_attention: block {} of sequence {} is {}, cache has {}", b, s,
             blk, a.cache.num_blocks());
      }
    }
    for (int64_t h = 0; h < Hkv; ++h) {
      for (int64_t q0 = 0; q0 < ql; q0 += kQTile) items.push_back({s, h, q0, std::min(ql, q0 + kQTile)});
    }
  }
  // An e4m3 cache is read as its codes (exact in bf16 and fp32) with the
  // scales folded into the score scale and the output (ops.h).
  const bool fp8 = a.cache.dtype() == DType::kF8E4M3;
  const float score_scale = fp8 ? scale * a.cache.k_scale : scale;
  const float out_scale = fp8 ? a.cache.v_scale : 1.0f;
  const uint16_t* kc = fp8 ? nullptr : a.cache.k.data_as<const uint16_t>();
  const uint16_t* vc = fp8 ? nullptr : a.cache.v.data_as<const uint16_t>();
  const uint8_t* kc8 = fp8 ? a.cache.k.data_as<const uint8_t>() : nullptr;
  const uint8_t* vc8 = fp8 ? a.cache.v.data_as<const uint8_t>() : nullptr;
  const uint16_t* q = a.q.data_as<const uint16_t>();
  const uint16_t* gate = a.gate.empty() ? nullptr : a.gate.data_as<const uint16_t>();
  uint16_t* out = a.out.data_as<uint16_t>();
  // Batch invariance: each query row sees its visible keys in position order;
  // its scores use the fixed-order dot of cpu_gemm.h and its output sums
  // p * v over positions in order, so neither the query tile nor the other
  // rows of the step change its result.
  cpu::parallel(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1) {
    std::vector<const uint16_t*> krows;
    std::vector<uint16_t> kcodes;  // e4m3 cache: the tile's key codes as bf16
    std::vector<float> vf, qf(static_cast<size_t>(D)), scores, of(static_cast<size_t>(D));
    for (int64_t it = i0; it < i1; ++it) {
      const Item& w = items[it];
      const int64_t ql = qsl[w.seq + 1] - qsl[w.seq], L = lens[w.seq], ctx = L - ql;
      const int64_t Lk = ctx + w.q1;  // keys the tile's last token sees
      krows.resize(static_cast<size_t>(Lk));
      vf.resize(static_cast<size_t>(Lk * D));
      scores.resize(static_cast<size_t>(Lk));
      if (fp8) kcodes.resize(static_cast<size_t>(Lk * D));
      for (int64_t p = 0; p < Lk; ++p) {
        const int64_t slot = int64_t{tables[w.seq * max_blocks + p / bs]} * bs + p % bs;
        const int64_t off = (slot * Hkv + w.kv_head) * D;
        if (!fp8) {
          krows[p] = kc + off;
          cpu::bf16_to_f32_row(vc + off, vf.data() + p * D, D);
          continue;
        }
        uint16_t* kr = kcodes.data() + p * D;
        for (int64_t d = 0; d < D; ++d) {
          kr[d] = cpu::to_bf(f8e4m3_to_f32(kc8[off + d]));
          vf[p * D + d] = f8e4m3_to_f32(vc8[off + d]);
        }
        krows[p] = kr;
      }
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = w.kv_head * group + g;
        for (int64_t j = w.q0; j < w.q1; ++j) {
          const int64_t base = ((qsl[w.seq] + j) * Hq + h) * D;
          const int64_t visible = ctx + j + 1;
          cpu::bf16_to_f32_row(q + base, qf.data(), D);
          cpu::dot_rows_bf16(qf.data(), krows.data(), visible, D, scores.data());
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t p = 0; p < visible; ++p) {
            scores[p] *= score_scale;
            mx = std::max(mx, scores[p]);
          }
          float sum = 0.0f;
          for (int64_t p = 0; p < visible; ++p) {
            scores[p] = std::exp(scores[p] - mx);
            sum += scores[p];
          }
          const float inv = out_scale / sum;
          std::fill(of.begin(), of.end(), 0.0f);
          for (int64_t p = 0; p < visible; ++p) cpu::axpy(scores[p] * inv, vf.data() + p * D, of.data(), D);
          for (int64_t d = 0; d < D; ++d) {
            const float o = cpu::bf(cpu::to_bf(of[d]));  // the bf16 attention output
            out[base + d] = gate ? cpu::to_bf(o * cpu::sigmoid(cpu::bf(gate[base + d]))) : cpu::to_bf(o);
          }
        }
      }
    }
  });
}

}  // namespace hyllm
