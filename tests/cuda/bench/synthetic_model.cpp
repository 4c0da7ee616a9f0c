#include "synthetic_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "model/loader/dummy_weights.h"

namespace hyllm::bench {

SyntheticModel::SyntheticModel(Backend& be, const ModelConfig& cfg, int64_t max_seqs, int64_t max_tokens,
                               int64_t max_context, float router_skew)
    : be_(be), cfg_(cfg), max_seqs_(max_seqs), max_tokens_(max_tokens), max_context_(max_context) {
  const int64_t H = cfg.hidden_size, V = cfg.vocab_size;
  max_blocks_per_seq_ = (max_context + block_size_ - 1) / block_size_;
  num_blocks_ = max_blocks_per_seq_ * max_seqs;
  // Weight scales keep activations O(1) through the random layers.
  const float ws = 1.0f / std::sqrt(static_cast<float>(H));
  embed_ = weight({V, H}, 1.0f, false);
  final_norm_ = weight({H}, 0.1f, false);
  lm_head_ = weight({V, H}, ws, false);
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    Layer l;
    l.attention = cfg.layer_types[i] == LayerType::kFullAttention;
    l.in_norm = weight({H}, 0.1f, false);
    l.post_norm = weight({H}, 0.1f, false);
    if (l.attention) {
      const int64_t D = cfg.head_dim, Hq = cfg.num_attention_heads, Hkv = cfg.num_key_value_heads;
      l.qkv_w = weight({Hq * 2 * D + 2 * Hkv * D, H}, ws);
      l.q_norm = weight({D}, 0.1f, false);
      l.k_norm = weight({D}, 0.1f, false);
      l.o_w = weight({H, Hq * D}, 1.0f / std::sqrt(static_cast<float>(Hq * D)));
      l.k_cache = weight({num_blocks_, block_size_, Hkv, D}, 1.0f, false);
      l.v_cache = weight({num_blocks_, block_size_, Hkv, D}, 1.0f, false);
    } else {
      const int64_t conv = cfg.linear_conv_dim(), vd = cfg.linear_value_dim(), Hv = cfg.linear_num_value_heads;
      l.qkvz_w = weight({conv + vd, H}, ws);
      l.ba_w = weight({2 * Hv, H}, ws);
      l.conv_w = weight({conv, 1, cfg.linear_conv_kernel_dim}, 0.5f, false);
      l.A_log = f32_param({Hv}, 0.0f, 1.0f);
      l.dt_bias = f32_param({Hv}, 0.0f, 0.5f);
      l.gnorm = weight({cfg.linear_value_head_dim}, 0.1f, false);
      l.out_w = weight({H, vd}, 1.0f / std::sqrt(static_cast<float>(vd)));
      l.conv_state = weight({max_seqs, cfg.linear_conv_kernel_dim - 1, conv}, 1.0f, false);
      l.ssm_state = f32_param({max_seqs, Hv, cfg.linear_value_head_dim, cfg.linear_key_head_dim}, 0.0f, 0.05f);
    }
    if (cfg.is_moe) {
      const int64_t E = cfg.num_experts, I = cfg.moe_intermediate_size, Is = cfg.shared_expert_intermediate_size;
      // Router rows [0, E) and the shared-expert gate row E in one tensor (one GEMM
      // for both where the router is a GEMM); rows scaled by the dummy router skew.
      l.router_w = alloc(DType::kBF16, {E + 1, H});
      const auto row_scale = dummy_router_row_scales(E, router_skew, static_cast<uint64_t>(i) * 7919u + 17u);
      for (int64_t e = 0; e <= E; ++e) {
        const float sc = e < E ? row_scale[e] : 1.0f;
        cuda_fill_uniform(be_, static_cast<uint16_t*>(l.router_w.data()) + e * H, DType::kBF16,
                          static_cast<size_t>(H), seed_++, 0.0f, ws * sc);
      }
      linear_bytes_ += static_cast<int64_t>(l.router_w.nbytes());
      l.experts_gate_up = weight({E, 2 * I, H}, ws, false);
      l.experts_down = weight({E, H, I}, 1.0f / std::sqrt(static_cast<float>(I)), false);
      l.shared_gate_up = weight({2 * Is, H}, ws);
      l.shared_down = weight({H, Is}, 1.0f / std::sqrt(static_cast<float>(Is)));
    } else {
      const int64_t I = cfg.intermediate_size;
      l.gate_up_w = weight({2 * I, H}, ws);
      l.down_w = weight({H, I}, 1.0f / std::sqrt(static_cast<float>(I)));
    }
    layers_.push_back(l);
  }
  const int64_t T = max_tokens, S = max_seqs;
  ids_ = alloc(DType::kI32, {T});
  positions_ = alloc(DType::kI32, {T});
  slots_ = alloc(DType::kI32, {T});
  block_tables_ = alloc(DType::kI32, {S, max_blocks_per_seq_});
  qsl_ = alloc(DType::kI32, {S + 1});
  seq_lens_ = alloc(DType::kI32, {S});
  state_idx_ = alloc(DType::kI32, {S});
  has_init_ = alloc(DType::kI32, {S});
  last_rows_ = alloc(DType::kI32, {S});
  int64_t widest = 2 * std::max(cfg.intermediate_size, cfg.shared_expert_intermediate_size);
  widest = std::max(widest, cfg.linear_conv_dim() + cfg.linear_value_dim());
  widest = std::max(widest, cfg.q_proj_rows() + 2 * cfg.num_key_value_heads * cfg.head_dim);
  res_ = alloc(DType::kBF16, {T, H});
  xn_ = alloc(DType::kBF16, {T, H});
  mo_ = alloc(DType::kBF16, {T, H});
  big_ = alloc(DType::kBF16, {T, widest});
  big2_ = alloc(DType::kBF16, {T, widest});
  q_ = alloc(DType::kBF16, {T, std::max(cfg.num_attention_heads * cfg.head_dim, cfg.linear_value_dim())});
  gate_ = alloc(DType::kBF16, {T, cfg.num_attention_heads * cfg.head_dim});
  attn_ = alloc(DType::kBF16, {T, std::max(cfg.num_attention_heads * cfg.head_dim, cfg.linear_value_dim())});
  if (cfg.is_moe) {
    expert_load_ = alloc(DType::kI32, {cfg.num_experts});
    be_.fill_zero(expert_load_.data(), expert_load_.nbytes());
    // Unit-variance-like inputs for moe_layers (uniform with sd 1).
    moe_x_ = alloc(DType::kBF16, {T, H});
    cuda_fill_uniform(be_, moe_x_.data(), DType::kBF16, static_cast<size_t>(T * H), seed_++, 0.0f, 1.7320508f);
  }
  last_res_ = alloc(DType::kBF16, {S, H});
  last_mo_ = alloc(DType::kBF16, {S, H});
  last_xn_ = alloc(DType::kBF16, {S, H});
  logits_ = alloc(DType::kF32, {S, V});
  be_.synchronize();
}

TensorView SyntheticModel::alloc(DType dtype, Shape shape) {
  buffers_.emplace_back(be_, dtype, shape);
  return buffers_.back().view();
}

TensorView SyntheticModel::weight(Shape shape, float scale, bool counts_as_linear) {
  TensorView t = alloc(DType::kBF16, shape);
  cuda_fill_uniform(be_, t.data(), DType::kBF16, static_cast<size_t>(t.numel()), seed_++, 0.0f, scale);
  if (counts_as_linear) linear_bytes_ += static_cast<int64_t>(t.nbytes());
  return t;
}

TensorView SyntheticModel::f32_param(Shape shape, float mean, float scale) {
  TensorView t = alloc(DType::kF32, shape);
  cuda_fill_uniform(be_, t.data(), DType::kF32, static_cast<size_t>(t.numel()), seed_++, mean, scale);
  return t;
}

TensorView SyntheticModel::upload_i32(const std::vector<int32_t>& v, TensorView& dst) {
  be_.copy_to_device(dst.data(), v.data(), v.size() * 4);
  return TensorView(dst.data(), DType::kI32, {static_cast<int64_t>(v.size())}, dst.device());
}

int64_t SyntheticModel::expert_bytes_per_layer_expert() const {
  return 3 * cfg_.moe_intermediate_size * cfg_.hidden_size * 2;
}
int64_t SyntheticModel::gdn_state_bytes_per_seq() const {
  return cfg_.num_linear_attention_layers() * cfg_.linear_num_value_heads * cfg_.linear_value_head_dim *
         cfg_.linear_key_head_dim * 4;
}
int64_t SyntheticModel::kv_bytes_per_token() const {
  return cfg_.num_full_attention_layers() * 2 * cfg_.num_key_value_heads * cfg_.head_dim * 2;
}
int64_t SyntheticModel::linear_params_active_per_token() const {
  int64_t n = linear_bytes_ / 2;
  if (cfg_.is_moe) n += cfg_.num_hidden_layers * cfg_.num_experts_per_tok * expert_bytes_per_layer_expert() / 2;
  return n;
}

void SyntheticModel::plan(const StepShape& step) {
  S_ = static_cast<int64_t>(step.new_tokens.size());
  std::vector<int32_t> ids, pos, slots, tables(static_cast<size_t>(S_ * max_blocks_per_seq_), 0), qsl{0}, lens,
      sidx, init, last;
  max_q_ = max_len_ = 0;
  for (int64_t s = 0; s < S_; ++s) {
    const int32_t n = step.new_tokens[s], ctx = step.context[s];
    for (int64_t b = 0; b < max_blocks_per_seq_; ++b) {
      tables[s * max_blocks_per_seq_ + b] = static_cast<int32_t>(s * max_blocks_per_seq_ + b);
    }
    for (int32_t j = 0; j < n; ++j) {
      const int32_t p = ctx + j;
      ids.push_back(static_cast<int32_t>((s * 7919 + p * 104729) % cfg_.vocab_size));
      pos.push_back(p);
      slots.push_back(static_cast<int32_t>((s * max_blocks_per_seq_ + p / block_size_) * block_size_ + p % block_size_));
    }
    qsl.push_back(qsl.back() + n);
    lens.push_back(ctx + n);
    sidx.push_back(static_cast<int32_t>(s));
    init.push_back(ctx > 0 ? 1 : 0);
    last.push_back(qsl.back() - 1);
    max_q_ = std::max<int64_t>(max_q_, n);
    max_len_ = std::max<int64_t>(max_len_, ctx + n);
  }
  T_ = static_cast<int64_t>(ids.size());
  HYLLM_CHECK(T_ <= max_tokens_ && S_ <= max_seqs_ && max_len_ <= max_context_, "step exceeds the bench capacity");
  upload_i32(ids, ids_);
  upload_i32(pos, positions_);
  upload_i32(slots, slots_);
  be_.copy_to_device(block_tables_.data(), tables.data(), tables.size() * 4);
  upload_i32(qsl, qsl_);
  upload_i32(lens, seq_lens_);
  upload_i32(sidx, state_idx_);
  upload_i32(init, has_init_);
  upload_i32(last, last_rows_);
  be_.synchronize();
}

namespace {
TensorView rows(const TensorView& t, int64_t n) { return t.slice_rows(0, n); }
TensorView view2(const TensorView& t, int64_t r, int64_t c) {
  return TensorView(t.data(), t.dtype(), {r, c}, t.device());
}
TensorView view1(const TensorView& t, int64_t n) { return TensorView(t.data(), t.dtype(), {n}, t.device()); }
}  // namespace

void SyntheticModel::mixer_attention(const Layer& l, const TensorView& x, const TensorView& out) {
  const int64_t T = T_, D = cfg_.head_dim, Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const int64_t Wq = Hq * 2 * D, Wkv = Hkv * D, W = Wq + 2 * Wkv;
  TensorView proj = view2(big_, T, W);
  linear(be_, {x, LinearWeight::bf16(l.qkv_w), proj});
  tick("gemm attention qkv");
  TensorView q = view2(q_, T, Hq * D), gate = view2(gate_, T, Hq * D), o = view2(attn_, T, Hq * D);
  AttentionPrepArgs prep{ColSlice(proj, 0, Wq), ColSlice(proj, Wq, Wkv), ColSlice(proj, Wq + Wkv, Wkv), l.q_norm,
                         l.k_norm, view1(positions_, T), view1(slots_, T), q, gate, KvCacheView{l.k_cache, l.v_cache},
                         Hq, Hkv, D, cfg_.rotary_dim, static_cast<float>(cfg_.rope_theta), 1e-6f};
  attention_prep(be_, prep);
  tick("attention_prep");
  PagedAttentionArgs pa{q, KvCacheView{l.k_cache, l.v_cache}, view2(block_tables_, S_, max_blocks_per_seq_),
                        view1(qsl_, S_ + 1), view1(seq_lens_, S_), gate, o, Hq, Hkv, D};
  pa.max_query_len = max_q_;
  pa.max_seq_len = max_len_;
  paged_attention(be_, pa);
  tick("paged_attention");
  linear(be_, {o, LinearWeight::bf16(l.o_w), out});
  tick("gemm attention o");
}

void SyntheticModel::mixer_gdn(const Layer& l, const TensorView& x, const TensorView& out) {
  const int64_t T = T_, conv = cfg_.linear_conv_dim(), vd = cfg_.linear_value_dim(), Hv = cfg_.linear_num_value_heads;
  TensorView proj = view2(big_, T, conv + vd);
  linear(be_, {x, LinearWeight::bf16(l.qkvz_w), proj});
  tick("gemm gdn in (qkvz)");
  TensorView ba = view2(gate_, T, 2 * Hv);
  linear(be_, {x, LinearWeight::bf16(l.ba_w), ba});
  tick("gemm gdn in (ba)");
  TensorView conv_out = view2(big2_, T, conv);
  gdn_conv(be_, {ColSlice(proj, 0, conv), l.conv_w, l.conv_state, view1(qsl_, S_ + 1), view1(state_idx_, S_),
                 view1(has_init_, S_), conv_out});
  tick("gdn_conv");
  TensorView o = view2(attn_, T, vd);
  GatedDeltaRuleArgs g{conv_out, ColSlice(ba, Hv, Hv), ColSlice(ba, 0, Hv), l.A_log, l.dt_bias, l.ssm_state,
                       view1(qsl_, S_ + 1), view1(state_idx_, S_), view1(has_init_, S_), o,
                       cfg_.linear_num_key_heads, Hv, cfg_.linear_key_head_dim, cfg_.linear_value_head_dim,
                       max_q_ > 1 ? DeltaRuleAlgorithm::kChunked : DeltaRuleAlgorithm::kRecurrent, max_q_};
  gated_delta_rule(be_, g);
  tick("gated_delta_rule");
  TensorView normed = view2(q_, T, vd);
  gated_rms_norm(be_, {o, ColSlice(proj, conv, vd), l.gnorm, normed, Hv, cfg_.linear_value_head_dim, 1e-6f});
  tick("gated_rms_norm");
  linear(be_, {normed, LinearWeight::bf16(l.out_w), out});
  tick("gemm gdn out");
}

void SyntheticModel::ffn(const Layer& l, const TensorView& x, const TensorView& out) {
  const int64_t T = T_;
  if (!cfg_.is_moe) {
    const int64_t I = cfg_.intermediate_size;
    TensorView gu = view2(big_, T, 2 * I), hid = view2(big2_, T, I);
    linear(be_, {x, LinearWeight::bf16(l.gate_up_w), gu});
    tick("gemm mlp gate_up");
    swiglu(be_, {gu, hid});
    tick("swiglu");
    linear(be_, {hid, LinearWeight::bf16(l.down_w), out});
    tick("gemm mlp down");
    return;
  }
  const int64_t E = cfg_.num_experts;
  MoeArgs m;
  m.x = x;
  m.router = l.router_w.slice_rows(0, E);
  m.top_k = cfg_.num_experts_per_tok;
  m.experts = {LinearWeight::bf16(l.experts_gate_up), LinearWeight::bf16(l.experts_down)};
  m.shared.gate_up = LinearWeight::bf16(l.shared_gate_up);
  m.shared.down = LinearWeight::bf16(l.shared_down);
  m.shared.gate = l.router_w.slice_rows(E, E + 1);
  m.out = out;
  if (count_load_) m.expert_load = expert_load_;
  moe(be_, m);
  tick(T <= 32 ? "moe (small regime)" : "moe (grouped regime)");
}

void SyntheticModel::moe_layers(int64_t T) {
  const int64_t saved = T_;
  T_ = T;
  for (const Layer& l : layers_) ffn(l, rows(moe_x_, T), rows(mo_, T));
  T_ = saved;
}

std::vector<int32_t> SyntheticModel::take_expert_load() {
  std::vector<int32_t> v(static_cast<size_t>(expert_load_.numel()));
  if (v.empty()) return v;
  be_.copy_to_host(v.data(), expert_load_.data(), expert_load_.nbytes());
  be_.fill_zero(expert_load_.data(), expert_load_.nbytes());
  return v;
}

void SyntheticModel::tick(const char* name) {
  if (profile_ == nullptr) return;
  be_.synchronize();
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  (*profile_)[name] += t - last_tick_;
  last_tick_ = t;
}

void SyntheticModel::forward(std::map<std::string, double>* profile) {
  profile_ = profile;
  if (profile_ != nullptr) {
    be_.synchronize();
    last_tick_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  const int64_t T = T_, H = cfg_.hidden_size;
  TensorView res = rows(res_, T), xn = rows(xn_, T), mo = rows(mo_, T);
  embedding(be_, {view1(ids_, T), embed_, res});
  tick("embedding / gather_rows");
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  rms_norm(be_, {res, layers_[0].in_norm, xn, {}, {}, eps, true});
  tick("rms_norm (+residual)");
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    if (l.attention) {
      mixer_attention(l, xn, mo);
    } else {
      mixer_gdn(l, xn, mo);
    }
    rms_norm(be_, {mo, l.post_norm, xn, res, res, eps, true});
    tick("rms_norm (+residual)");
    ffn(l, xn, mo);
    if (i + 1 < layers_.size()) rms_norm(be_, {mo, layers_[i + 1].in_norm, xn, res, res, eps, true});
    tick("rms_norm (+residual)");
  }
  // Only each sequence's last token reaches the final norm and the lm_head.
  TensorView last = view1(last_rows_, S_);
  gather_rows(be_, {mo, last, rows(last_mo_, S_)});
  gather_rows(be_, {res, last, rows(last_res_, S_)});
  tick("embedding / gather_rows");
  rms_norm(be_, {rows(last_mo_, S_), final_norm_, rows(last_xn_, S_), rows(last_res_, S_), {}, eps, true});
  tick("rms_norm (+residual)");
  linear(be_, {rows(last_xn_, S_), LinearWeight::bf16(lm_head_), view2(logits_, S_, cfg_.vocab_size)});
  tick("gemm lm_head");
  // The map lives for this call only: moe_layers and later forwards must not tick into it.
  profile_ = nullptr;
  (void)H;
}

}  // namespace hyllm::bench
