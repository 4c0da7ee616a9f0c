#include "model/layers/moe.h"

namespace hyllm {

MoeBlock MoeBlock::load(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix) {
  MoeBlock m;
  m.num_experts_ = cfg.num_experts;
  m.top_k_ = cfg.num_experts_per_tok;
  m.hidden_ = cfg.hidden_size;
  if (!cfg.norm_topk_prob)
    fail(ErrorCode::kUnsupported, "MoE routing without top-k renormalisation (norm_topk_prob false)");
  m.router_ = Linear::load(w, {prefix + ".gate"});
  const std::string e = prefix + ".experts.";
  if (w.contains(e + "gate_up_proj")) {
    if (w.info(e + "gate_up_proj").dtype == DType::kF8E4M3)
      fail(ErrorCode::kUnsupported, "{}: fused FP8 experts are not supported", prefix);
    m.experts_.gate_up = LinearWeight::bf16(w.load(e + "gate_up_proj", DType::kBF16));
    m.experts_.down = LinearWeight::bf16(w.load(e + "down_proj", DType::kBF16));
  } else {
    for (int64_t i = 0; i < cfg.num_experts; ++i) {
      const std::string p = e + std::to_string(i) + ".";
      m.experts_.expert_gate.push_back(Linear::load(w, {p + "gate_proj"}).weight());
      m.experts_.expert_up.push_back(Linear::load(w, {p + "up_proj"}).weight());
      m.experts_.expert_down.push_back(Linear::load(w, {p + "down_proj"}).weight());
    }
  }
  m.shared_ = Mlp::load(w, prefix + ".shared_expert");
  m.shared_gate_ = Linear::load(w, {prefix + ".shared_expert_gate"});
  return m;
}

InputNeeds MoeBlock::input_needs() const {
  // The routed experts read the bf16 input.
  InputNeeds needs = InputNeeds::bf16_only();
  needs |= router_.input_needs();
  needs |= shared_.input_needs();
  needs |= shared_gate_.input_needs();
  return needs;
}

TensorView MoeBlock::forward(Backend& be, Scratch& s, const LayerInput& in) const {
  const TensorView& x = in.x;
  const int64_t T = x.dim(0);
  TensorView logits = router_.forward_one(be, s, in);
  TensorView ids = s.take(DType::kI32, Shape{T, top_k_});
  TensorView weights = s.take(DType::kF32, Shape{T, top_k_});
  moe_route(be, {logits, ids, weights, top_k_});
  TensorView shared = shared_.forward(be, s, in);
  TensorView shared_gate = shared_gate_.forward_one(be, s, in);
  TensorView out = s.take(DType::kBF16, Shape{T, hidden_});
  moe_experts(be, {x, ids, weights, experts_, shared, shared_gate, out});
  return out;
}

size_t MoeBlock::scratch_bytes(int64_t T) const {
  return router_.scratch_bytes(T) + Scratch::bytes_for(DType::kI32, T, top_k_) +
         Scratch::bytes_for(DType::kF32, T, top_k_) + shared_.scratch_bytes(T) + shared_gate_.scratch_bytes(T) +
         Scratch::bytes_for(DType::kBF16, T, hidden_);
}

}  // namespace hyllm
