#include "model/layers/moe.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/layers/linear.h"
#include "model/layers/moe_weights.h"

namespace hyllm {

MoeBlock MoeBlock::load(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix,
                        const TensorView& expert_load) {
  MoeBlock m;
  m.load_ = expert_load;
  m.out_sum_ = RowParallelSum(w.backend());
  m.prefix_ = prefix;
  m.num_experts_ = cfg.num_experts;
  m.top_k_ = cfg.num_experts_per_tok;
  m.hidden_ = cfg.hidden_size;
  if (!cfg.norm_topk_prob)
    fail(ErrorCode::kUnsupported, "MoE routing without top-k renormalisation (norm_topk_prob false)");
  const std::string e = prefix + ".experts.";
  StackedExperts experts;
  if (w.contains(e + "gate_up_proj")) {
    experts = load_fused_experts(w, e);
  } else {
    std::vector<std::string> modules;
    for (int64_t i = 0; i < cfg.num_experts; ++i) modules.push_back(e + std::to_string(i) + ".");
    experts = load_per_expert(w, modules);
  }
  if (experts.gate_up.weight.dim(0) != cfg.num_experts || experts.gate_up.weight.dim(2) != cfg.hidden_size)
    fail(ErrorCode::kCorruptData, "{}: experts {} do not fit {} experts of hidden size {}", prefix,
         experts.gate_up.weight.shape().str(), cfg.num_experts, cfg.hidden_size);
  m.experts_ = {experts.gate_up, experts.down};
  const bool shared = w.contains(prefix + ".shared_expert.gate_proj.weight");
  const std::string gate = prefix + ".shared_expert_gate.weight";
  m.router_ = load_router(w, prefix + ".gate.weight", shared && w.contains(gate) ? gate : "");
  if (m.router_.dim(0) < cfg.num_experts)
    fail(ErrorCode::kCorruptData, "{}.gate.weight has {} rows for {} experts", prefix, m.router_.dim(0),
         cfg.num_experts);
  if (shared) {
    StackedExperts s = load_per_expert(w, {prefix + ".shared_expert."});
    m.shared_.gate_up = unstack(s.gate_up, 0);
    m.shared_.down = unstack(s.down, 0);
    if (w.contains(gate)) m.shared_.gate = m.router_.slice_rows(cfg.num_experts, cfg.num_experts + 1);
  }
  return m;
}

InputNeeds MoeBlock::input_needs() const {
  // The router and the gate read bf16; FP8 experts (stored per-tensor ones
  // load as block FP8, see moe_weights.cpp) share one kGroup128 quantisation
  // of the input.
  InputNeeds needs = InputNeeds::bf16_only();
  if (experts_.gate_up.format == WeightFormat::kFp8Block ||
      (!shared_.empty() && shared_.gate_up.format == WeightFormat::kFp8Block))
    needs.mode = ActQuantMode::kGroup128;
  return needs;
}

TensorView MoeBlock::forward(Backend& be, Scratch& s, const LayerInput& in) const {
  const TensorView& x = in.x;
  if (const LinearInputObserver& observe = linear_input_observer()) {
    // Calibration: the inputs of the projections the moe op runs inside it
    // (the shared expert's SwiGLU output made here for it, off the scratch).
    observe(prefix_ + ".gate", x);
    if (!shared_.empty()) {
      if (!shared_.gate.empty()) observe(prefix_ + ".shared_expert_gate", x);
      observe(prefix_ + ".shared_expert.gate_proj", x);
      observe(prefix_ + ".shared_expert.up_proj", x);
      const int64_t Is = shared_.intermediate();
      DeviceBuffer gu(be, DType::kBF16, Shape{x.dim(0), 2 * Is}), h(be, DType::kBF16, Shape{x.dim(0), Is});
      linear(be, {x, shared_.gate_up, gu.view()});
      swiglu(be, {gu.view(), h.view()});
      observe(prefix_ + ".shared_expert.down_proj", h.view());
    }
  }
  TensorView out = s.take(DType::kBF16, Shape{x.dim(0), hidden_});
  MoeArgs a;
  a.x = x;
  if (in.xq.mode == ActQuantMode::kGroup128) a.xq = in.xq;
  a.router = router_.slice_rows(0, num_experts_);
  a.top_k = top_k_;
  a.experts = experts_;
  a.shared = shared_;
  a.out = out;
  a.expert_load = load_;
  moe(be, a);
  return out_sum_.reduce(be, s, out);
}

size_t MoeBlock::scratch_bytes(int64_t T) const { return Scratch::bytes_for(DType::kBF16, T, hidden_); }

std::string moe_load_summary(const std::vector<int32_t>& load, int64_t E) {
  int64_t rows = 0;
  int32_t hottest = 0;
  for (int32_t n : load) {
    rows += n;
    hottest = std::max(hottest, n);
  }
  const int64_t pairs = static_cast<int64_t>(load.size());
  if (pairs == 0 || rows == 0 || E <= 0) return "no routed rows";
  const double mean = static_cast<double>(rows) / static_cast<double>(pairs);
  int64_t bucket[5] = {0, 0, 0, 0, 0};  // 0, (0, 0.5), [0.5, 2), [2, 4), >= 4 times the mean
  for (int32_t n : load) {
    const double r = n / mean;
    bucket[n == 0 ? 0 : r < 0.5 ? 1 : r < 2.0 ? 2 : r < 4.0 ? 3 : 4]++;
  }
  return fmt::format("{} rows over {} layers, mean {:.1f} per expert, hottest {} ({:.1f}x); experts with 0 / <0.5x / "
                     "0.5-2x / 2-4x / >=4x the mean: {} / {} / {} / {} / {}",
                     rows, pairs / E, mean, hottest, hottest / mean, bucket[0], bucket[1], bucket[2], bucket[3],
                     bucket[4]);
}

}  // namespace hyllm
