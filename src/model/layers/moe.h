#pragma once
// Qwen3.5 MoE block: router (softmax over all experts, top-k, renormalised),
// routed SwiGLU experts, and the shared expert scaled by
// sigmoid(shared_expert_gate(x)), all in one moe op (ops.h). Weights are
// loaded in the op's layout by model/layers/moe_weights.h from either
// checkpoint layout.

#include <string>
#include <vector>

#include "backend/ops.h"
#include "model/config/model_config.h"
#include "model/layers/activation.h"
#include "model/layers/scratch.h"
#include "model/layers/tensor_parallel.h"
#include "model/layers/weights.h"

namespace hyllm {

class MoeBlock {
 public:
  // `prefix`: "layers.3.mlp". expert_load (optional, [E] i32, zeroed) counts
  // the tokens routed to each expert, step after step.
  static MoeBlock load(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix,
                       const TensorView& expert_load = {});

  InputNeeds input_needs() const;
  TensorView forward(Backend& be, Scratch& s, const LayerInput& in) const;
  size_t scratch_bytes(int64_t tokens) const;

 private:
  TensorView router_;  // [E, H], then the shared-expert gate row
  MoeExpertWeights experts_;
  MoeSharedExpert shared_;
  TensorView load_;  // optional [E] i32
  // Under tensor parallelism every expert (and the shared expert) holds a
  // slice of its intermediate columns: the op's bf16 outputs are partials.
  RowParallelSum out_sum_;
  std::string prefix_;
  int64_t num_experts_ = 0, top_k_ = 0, hidden_ = 0;
};

// One debug line over the expert loads of a step (`load` [layers, E]: tokens
// routed to each expert of each MoE layer): rows in all, the hottest expert
// against an even spread, and how many (layer, expert) pairs got no rows,
// under half, up to 2x, 2-4x and over 4x the mean.
std::string moe_load_summary(const std::vector<int32_t>& load, int64_t num_experts);

}  // namespace hyllm
