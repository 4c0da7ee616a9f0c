#pragma once
// Qwen3.5 MoE block: router (softmax over all experts, top-k, renormalised),
// routed SwiGLU experts in either checkpoint layout (fused gate_up_proj or per
// expert), plus the shared expert scaled by sigmoid(shared_expert_gate(x)).

#include <string>

#include "model/config/model_config.h"
#include "model/layers/activation.h"
#include "model/layers/mlp.h"

namespace hyllm {

class MoeBlock {
 public:
  static MoeBlock load(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix);

  InputNeeds input_needs() const;
  TensorView forward(Backend& be, Scratch& s, const LayerInput& in) const;
  size_t scratch_bytes(int64_t tokens) const;

 private:
  Linear router_;
  MoeExpertWeights experts_;
  Mlp shared_;
  Linear shared_gate_;
  int64_t num_experts_ = 0, top_k_ = 0, hidden_ = 0;
};

}  // namespace hyllm
