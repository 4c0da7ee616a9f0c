#include "model/layers/gated_delta_net.h"

namespace hyllm {

GatedDeltaNet GatedDeltaNet::load(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix) {
  GatedDeltaNet g;
  const std::string p = prefix + ".linear_attn.";
  g.qkvz_ = Linear::load(w, {p + "in_proj_qkv", p + "in_proj_z"});
  g.ba_ = Linear::load(w, {p + "in_proj_b", p + "in_proj_a"});
  g.out_proj_ = Linear::load(w, {p + "out_proj"});
  g.out_sum_ = RowParallelSum(w.backend());
  g.conv_weight_ = w.load(p + "conv1d.weight", DType::kBF16);
  g.A_log_ = load_param(w, p + "A_log");
  g.dt_bias_ = load_param(w, p + "dt_bias");
  g.norm_weight_ = load_param(w, p + "norm.weight");
  g.hk_ = cfg.linear_num_key_heads;
  g.hv_ = cfg.linear_num_value_heads;
  g.dk_ = cfg.linear_key_head_dim;
  g.dv_ = cfg.linear_value_head_dim;
  g.conv_dim_ = cfg.linear_conv_dim();
  g.hidden_ = cfg.hidden_size;
  g.eps_ = static_cast<float>(cfg.rms_norm_eps);
  return g;
}

InputNeeds GatedDeltaNet::input_needs() const {
  InputNeeds needs = qkvz_.input_needs();
  needs |= ba_.input_needs();
  return needs;
}

TensorView GatedDeltaNet::forward(Backend& be, Scratch& s, const LayerInput& in, const StepContext& ctx,
                                  const GdnStateView& state) const {
  const int64_t T = in.rows();
  auto qkvz = qkvz_.forward(be, s, in);
  auto ba = ba_.forward(be, s, in);

  TensorView conv_out = s.take(DType::kBF16, Shape{T, conv_dim_});
  const StateSaveArgs save{ctx.state_save_slots, ctx.state_save_lens};
  gdn_conv(be, {qkvz[0], conv_weight_, state.conv, ctx.query_start_loc, ctx.state_indices, ctx.has_initial_state,
                conv_out, state.spec_conv, save, ctx.max_query_len});

  TensorView core = s.take(DType::kBF16, Shape{T, hv_ * dv_});
  GatedDeltaRuleArgs dr;
  dr.qkv = conv_out;
  dr.b = ba[0];
  dr.a = ba[1];
  dr.A_log = A_log_;
  dr.dt_bias = dt_bias_;
  dr.state = state.recurrent;
  dr.query_start_loc = ctx.query_start_loc;
  dr.state_indices = ctx.state_indices;
  dr.has_initial_state = ctx.has_initial_state;
  dr.out = core;
  dr.num_k_heads = hk_;
  dr.num_v_heads = hv_;
  dr.k_dim = dk_;
  dr.v_dim = dv_;
  dr.algorithm = ctx.decode_only ? DeltaRuleAlgorithm::kRecurrent : DeltaRuleAlgorithm::kChunked;
  dr.max_query_len = ctx.max_query_len;
  dr.spec_states = state.spec_recurrent;
  dr.save = save;
  gated_delta_rule(be, dr);

  LayerInput normed = take_input(s, out_proj_.input_needs(), T, hv_ * dv_);
  gated_rms_norm(be, {core, qkvz[1], norm_weight_, normed.x, hv_, dv_, eps_, normed.xq});
  return out_sum_.reduce(be, s, out_proj_.forward_one(be, s, normed, out_sum_.partial_dtype()));
}

size_t GatedDeltaNet::scratch_bytes(int64_t T) const {
  return qkvz_.scratch_bytes(T) + ba_.scratch_bytes(T) + Scratch::bytes_for(DType::kBF16, T, conv_dim_) +
         Scratch::bytes_for(DType::kBF16, T, hv_ * dv_) + input_bytes(out_proj_.input_needs(), T, hv_ * dv_) +
         out_proj_.scratch_bytes(T, out_sum_.partial_dtype()) + out_sum_.scratch_bytes(T, hidden_);
}

}  // namespace hyllm
