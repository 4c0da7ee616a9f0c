#pragma once
// Qwen3.5 Gated DeltaNet (linear attention): merged in_proj_qkv|in_proj_z and
// in_proj_b|in_proj_a projections, causal depthwise conv over q|k|v with the
// conv state, the gated delta rule with fp32 recurrent state (chunked for
// prefill, recurrent for pure decode steps), the gated RMSNorm (plain w,
// SiLU(z)) per value head, out_proj. A step that asks for state saves
// (StepContext::state_save_slots, prefix caching) gets them from both state
// ops in the same forward.

#include <string>

#include "model/config/model_config.h"
#include "model/layers/linear.h"
#include "model/layers/tensor_parallel.h"
#include "model/layers/params.h"
#include "model/step_context.h"

namespace hyllm {

// One GDN layer's state slots: conv [slots, K-1, C] bf16, recurrent
// [slots, Hv, Dv, Dk] f32; for a speculative verify step also the saved
// states after each of a sequence's first K_spec tokens (ops.h spec_states):
// spec_conv [slots, K_spec, K-1, C], spec_recurrent [slots, K_spec, Hv, Dv, Dk].
struct GdnStateView {
  TensorView conv;
  TensorView recurrent;
  TensorView spec_conv;       // optional
  TensorView spec_recurrent;  // optional
};

class GatedDeltaNet {
 public:
  static GatedDeltaNet load(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix);

  InputNeeds input_needs() const;
  TensorView forward(Backend& be, Scratch& s, const LayerInput& in, const StepContext& ctx,
                     const GdnStateView& state) const;
  size_t scratch_bytes(int64_t tokens) const;

 private:
  Linear qkvz_;  // parts: qkv [conv_dim], z [value_dim]
  Linear ba_;    // parts: b [Hv], a [Hv]
  Linear out_proj_;
  RowParallelSum out_sum_;  // out_proj is row-parallel under tensor parallelism
  TensorView conv_weight_, A_log_, dt_bias_, norm_weight_;
  int64_t hk_ = 0, hv_ = 0, dk_ = 0, dv_ = 0, conv_dim_ = 0, hidden_ = 0;
  float eps_ = 1e-6f;
};

}  // namespace hyllm
