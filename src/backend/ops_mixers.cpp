// Validation and dispatch of the token mixers: gated attention and Gated DeltaNet.
#include <cmath>

#include "backend/backend.h"
#include "backend/kernels.h"
#include "backend/ops.h"
#include "backend/ops_check.h"

namespace hyllm {

using ops_detail::kAny;
using ops_detail::OpCheck;

namespace {
void check_cache(const OpCheck& c, const KvCacheView& cache, int64_t num_kv_heads, int64_t head_dim) {
  c.tensor("cache.k", cache.k, {DType::kBF16, DType::kF8E4M3}, {kAny, kAny, num_kv_heads, head_dim});
  c.tensor("cache.v", cache.v, {cache.k.dtype()}, {cache.k.dim(0), cache.k.dim(1), num_kv_heads, head_dim});
  c.require(cache.block_size() > 0, "cache block size must be positive");
  if (cache.dtype() == DType::kF8E4M3) {
    c.require(std::isfinite(cache.k_scale) && cache.k_scale > 0.0f && std::isfinite(cache.v_scale) &&
                  cache.v_scale > 0.0f,
              "fp8 cache scales must be finite and positive, got k_scale {} v_scale {}", cache.k_scale,
              cache.v_scale);
  }
}

void check_save(const OpCheck& c, const StateSaveArgs& save, int64_t num_seqs) {
  c.require(save.save_slots.empty() == save.save_lens.empty(), "save_slots and save_lens come together");
  c.optional("save_slots", save.save_slots, {DType::kI32}, {num_seqs});
  c.optional("save_lens", save.save_lens, {DType::kI32}, {num_seqs});
}

void check_heads(const OpCheck& c, int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim) {
  c.require(num_q_heads > 0 && num_kv_heads > 0 && head_dim > 0,
            "head counts {}/{} and head_dim {} must be positive", num_q_heads, num_kv_heads, head_dim);
  c.require(num_q_heads % num_kv_heads == 0, "num_q_heads {} is not a multiple of num_kv_heads {}",
            num_q_heads, num_kv_heads);
}
}  // namespace

void attention_prep(Backend& be, const AttentionPrepArgs& a) {
  OpCheck c(be.device(), "attention_prep");
  check_heads(c, a.num_q_heads, a.num_kv_heads, a.head_dim);
  const int64_t D = a.head_dim, Wq = a.num_q_heads * D, Wkv = a.num_kv_heads * D;
  c.tensor("positions", a.positions, {DType::kI32}, {kAny});
  const int64_t T = a.positions.dim(0);
  c.cols("q_gate", a.q_gate, {DType::kBF16}, T, 2 * Wq);
  c.cols("k", a.k, {DType::kBF16}, T, Wkv);
  c.cols("v", a.v, {DType::kBF16}, T, Wkv);
  c.tensor("q_norm", a.q_norm, {DType::kBF16, DType::kF32}, {D});
  c.tensor("k_norm", a.k_norm, {DType::kBF16, DType::kF32}, {D});
  c.tensor("slot_mapping", a.slot_mapping, {DType::kI32}, {T});
  c.tensor("q_out", a.q_out, {DType::kBF16}, {T, Wq});
  c.tensor("gate_out", a.gate_out, {DType::kBF16}, {T, Wq});
  check_cache(c, a.cache, a.num_kv_heads, D);
  c.require(a.rotary_dim >= 0 && a.rotary_dim % 2 == 0 && a.rotary_dim <= D,
            "rotary_dim {} must be even and in [0, head_dim {}]", a.rotary_dim, D);
  c.require(a.rope_theta > 0.0f, "rope_theta must be positive, got {}", a.rope_theta);
  c.require(a.eps > 0.0f, "eps must be positive, got {}", a.eps);
  be.kernels().attention_prep(a);
}

void paged_attention(Backend& be, const PagedAttentionArgs& a) {
  OpCheck c(be.device(), "paged_attention");
  check_heads(c, a.num_q_heads, a.num_kv_heads, a.head_dim);
  const int64_t Wq = a.num_q_heads * a.head_dim;
  c.tensor("q", a.q, {DType::kBF16}, {kAny, Wq});
  const int64_t T = a.q.dim(0);
  check_cache(c, a.cache, a.num_kv_heads, a.head_dim);
  const int64_t S = c.sequences(a.query_start_loc);
  c.tensor("seq_lens", a.seq_lens, {DType::kI32}, {S});
  c.tensor("block_tables", a.block_tables, {DType::kI32}, {S, kAny});
  c.optional("gate", a.gate, {DType::kBF16}, {T, Wq});
  c.tensor("out", a.out, {DType::kBF16}, {T, Wq});
  c.require(a.scale >= 0.0f, "scale must be >= 0 (0 = 1/sqrt(head_dim)), got {}", a.scale);
  be.kernels().paged_attention(a);
}

void gdn_conv(Backend& be, const GdnConvArgs& a) {
  OpCheck c(be.device(), "gdn_conv");
  c.require(a.weight.rank() == 2 || (a.weight.rank() == 3 && a.weight.dim(1) == 1),
            "weight has shape {}, expected [C, K] or [C, 1, K]", a.weight.shape().str());
  const int64_t C = a.weight.dim(0), K = a.weight.dim(-1);
  c.require(K >= 1, "conv kernel width must be >= 1");
  if (a.weight.rank() == 2) {
    c.tensor("weight", a.weight, {DType::kBF16}, {C, K});
  } else {
    c.tensor("weight", a.weight, {DType::kBF16}, {C, 1, K});
  }
  c.tensor("out", a.out, {DType::kBF16}, {kAny, C});
  const int64_t T = a.out.dim(0);
  c.cols("x", a.x, {DType::kBF16}, T, C);
  c.tensor("conv_state", a.conv_state, {DType::kBF16}, {kAny, K - 1, C});
  const int64_t S = c.sequences(a.query_start_loc);
  c.tensor("state_indices", a.state_indices, {DType::kI32}, {S});
  c.tensor("has_initial_state", a.has_initial_state, {DType::kI32}, {S});
  c.optional("spec_states", a.spec_states, {DType::kBF16}, {a.conv_state.dim(0), kAny, K - 1, C});
  check_save(c, a.save, S);
  be.kernels().gdn_conv(a);
}

void gated_delta_rule(Backend& be, const GatedDeltaRuleArgs& a) {
  OpCheck c(be.device(), "gated_delta_rule");
  const int64_t Hk = a.num_k_heads, Hv = a.num_v_heads, Dk = a.k_dim, Dv = a.v_dim;
  c.require(Hk > 0 && Hv > 0 && Dk > 0 && Dv > 0, "heads {}/{} and dims {}/{} must be positive", Hk, Hv, Dk,
            Dv);
  c.require(Hv % Hk == 0, "num_v_heads {} is not a multiple of num_k_heads {}", Hv, Hk);
  c.tensor("qkv", a.qkv, {DType::kBF16}, {kAny, 2 * Hk * Dk + Hv * Dv});
  const int64_t T = a.qkv.dim(0);
  c.cols("a", a.a, {DType::kBF16}, T, Hv);
  c.cols("b", a.b, {DType::kBF16}, T, Hv);
  c.tensor("A_log", a.A_log, {DType::kF32, DType::kBF16}, {Hv});
  c.tensor("dt_bias", a.dt_bias, {DType::kF32, DType::kBF16}, {Hv});
  c.tensor("state", a.state, {DType::kF32}, {kAny, Hv, Dv, Dk});
  const int64_t S = c.sequences(a.query_start_loc);
  c.tensor("state_indices", a.state_indices, {DType::kI32}, {S});
  c.tensor("has_initial_state", a.has_initial_state, {DType::kI32}, {S});
  c.tensor("out", a.out, {DType::kBF16}, {T, Hv * Dv});
  c.require(a.algorithm == DeltaRuleAlgorithm::kChunked || a.algorithm == DeltaRuleAlgorithm::kRecurrent,
            "unknown algorithm {}", static_cast<int>(a.algorithm));
  c.optional("spec_states", a.spec_states, {DType::kF32}, {a.state.dim(0), kAny, Hv, Dv, Dk});
  check_save(c, a.save, S);
  be.kernels().gated_delta_rule(a);
}

void select_state(Backend& be, const SelectStateArgs& a) {
  OpCheck c(be.device(), "select_state");
  c.require(a.live.rank() >= 1 && a.saved.rank() == a.live.rank() + 1,
            "saved has shape {}, expected [num_slots, K_spec] + the shape of live {}", a.saved.shape().str(),
            a.live.shape().str());
  bool same = a.saved.dim(0) == a.live.dim(0);
  for (int i = 1; same && i < a.live.rank(); ++i) same = a.saved.dim(i + 1) == a.live.dim(i);
  c.require(same, "saved has shape {}, expected [num_slots, K_spec] + the shape of live {}", a.saved.shape().str(),
            a.live.shape().str());
  c.require(a.saved.dtype() == a.live.dtype(), "saved is {}, live is {}", dtype_name(a.saved.dtype()),
            dtype_name(a.live.dtype()));
  c.tensor("state_indices", a.state_indices, {DType::kI32}, {kAny});
  c.tensor("keep", a.keep, {DType::kI32}, {a.state_indices.dim(0)});
  be.kernels().select_state(a);
}

}  // namespace hyllm
