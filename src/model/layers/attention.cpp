#include "model/layers/attention.h"

#include <cmath>
#include <cstring>

namespace hyllm {

namespace {

// A KV-cache scale of the checkpoint (a float scalar), 1.0 when absent.
float load_kv_scale(WeightLoader& w, const std::string& name) {
  if (!w.contains(name)) return 1.0f;
  const TensorInfo& ti = w.info(name);
  const auto bytes = w.read_host(name);
  const bool float_type = ti.dtype == DType::kF32 || ti.dtype == DType::kBF16 || ti.dtype == DType::kF16;
  if (ti.shape.numel() != 1 || !float_type)
    fail(ErrorCode::kCorruptData, "{}: KV-cache scale {} must be one float, got {} {}", ti.origin, name,
         dtype_name(ti.dtype), ti.shape.str());
  float v = 0.0f;
  const auto f32 = convert_float_bytes(bytes.data(), ti.dtype, DType::kF32, 1);
  std::memcpy(&v, f32.data(), sizeof v);
  if (!(std::isfinite(v) && v > 0.0f))
    fail(ErrorCode::kCorruptData, "{}: KV-cache scale {} is {}; it must be finite and positive", ti.origin, name, v);
  return v;
}

}  // namespace

GatedAttention GatedAttention::load(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix) {
  if (!cfg.attn_output_gate)
    fail(ErrorCode::kUnsupported, "attention without the output gate (attn_output_gate false) is not supported");
  GatedAttention a;
  const std::string p = prefix + ".self_attn.";
  a.qkv_ = Linear::load(w, {p + "q_proj", p + "k_proj", p + "v_proj"});
  a.o_proj_ = Linear::load(w, {p + "o_proj"});
  a.o_sum_ = RowParallelSum(w.backend());
  // ModelOpt checkpoints may carry calibrated FP8 KV-cache scales; an FP8
  // cache uses them (a bf16 cache needs none), 1.0 where they are absent.
  a.k_scale_ = load_kv_scale(w, p + "k_scale");
  a.v_scale_ = load_kv_scale(w, p + "v_scale");
  a.has_kv_scales_ = w.contains(p + "k_scale") || w.contains(p + "v_scale");
  a.q_norm_ = load_param(w, p + "q_norm.weight");
  a.k_norm_ = load_param(w, p + "k_norm.weight");
  a.rotary_ = {cfg.rotary_dim, static_cast<float>(cfg.rope_theta)};
  a.num_q_heads_ = cfg.num_attention_heads;
  a.num_kv_heads_ = cfg.num_key_value_heads;
  a.head_dim_ = cfg.head_dim;
  a.hidden_ = cfg.hidden_size;
  a.eps_ = static_cast<float>(cfg.rms_norm_eps);
  return a;
}

TensorView GatedAttention::forward(Backend& be, Scratch& s, const LayerInput& in, const StepContext& ctx,
                                   const KvCacheView& cache) const {
  const int64_t T = in.rows();
  const int64_t width = num_q_heads_ * head_dim_;
  auto parts = qkv_.forward(be, s, in);
  TensorView q = s.take(DType::kBF16, Shape{T, width});
  TensorView gate = s.take(DType::kBF16, Shape{T, width});
  AttentionPrepArgs prep;
  prep.q_gate = parts[0];
  prep.k = parts[1];
  prep.v = parts[2];
  prep.q_norm = q_norm_;
  prep.k_norm = k_norm_;
  prep.positions = ctx.positions;
  prep.slot_mapping = ctx.slot_mapping;
  prep.q_out = q;
  prep.gate_out = gate;
  KvCacheView scaled = cache;
  scaled.k_scale = k_scale_;
  scaled.v_scale = v_scale_;
  prep.cache = scaled;
  prep.num_q_heads = num_q_heads_;
  prep.num_kv_heads = num_kv_heads_;
  prep.head_dim = head_dim_;
  prep.rotary_dim = rotary_.rotary_dim;
  prep.rope_theta = rotary_.theta;
  prep.eps = eps_;
  attention_prep(be, prep);

  TensorView o = s.take(DType::kBF16, Shape{T, width});
  PagedAttentionArgs att;
  att.q = q;
  att.cache = scaled;
  att.block_tables = ctx.block_tables;
  att.query_start_loc = ctx.query_start_loc;
  att.seq_lens = ctx.seq_lens;
  att.gate = gate;
  att.out = o;
  att.num_q_heads = num_q_heads_;
  att.num_kv_heads = num_kv_heads_;
  att.head_dim = head_dim_;
  att.max_query_len = ctx.max_query_len;
  att.max_seq_len = ctx.max_seq_len;
  paged_attention(be, att);
  // The attention kernel writes bf16 only: an FP8 o_proj's input is quantised
  // here, once.
  LayerInput o_in{o, {}};
  const InputNeeds o_needs = o_proj_.input_needs();
  if (o_needs.mode != ActQuantMode::kNone) {
    LayerInput q = take_input(s, {o_needs.mode, o_needs.static_scale, false}, T, width);
    quantize_fp8(be, {o, q.xq});
    o_in.xq = q.xq;
  }
  return o_sum_.reduce(be, s, o_proj_.forward_one(be, s, o_in, o_sum_.partial_dtype()));
}

size_t GatedAttention::scratch_bytes(int64_t T) const {
  const int64_t width = num_q_heads_ * head_dim_;
  return qkv_.scratch_bytes(T) + 3 * Scratch::bytes_for(DType::kBF16, T, width) +
         input_bytes(o_proj_.input_needs(), T, width) + o_proj_.scratch_bytes(T, o_sum_.partial_dtype()) +
         o_sum_.scratch_bytes(T, hidden_);
}

}  // namespace hyllm
