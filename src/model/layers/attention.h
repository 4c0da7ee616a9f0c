#pragma once
// Qwen3.5 gated full attention: one merged q(+gate)/k/v projection, per-head
// q/k RMSNorm (1+w) and partial RoPE, paged causal GQA over the cached
// context, sigmoid output gate, o_proj.

#include <string>

#include "model/config/model_config.h"
#include "model/layers/linear.h"
#include "model/layers/params.h"
#include "model/layers/tensor_parallel.h"
#include "model/step_context.h"

namespace hyllm {

class GatedAttention {
 public:
  // `prefix` is the layer's canonical prefix, "layers.3".
  static GatedAttention load(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix);

  // x [T, H] bf16 -> [T, H] bf16 (scratch). Writes the tokens' k/v to
  // `cache` (with this layer's scales when it is an FP8 cache).
  InputNeeds input_needs() const { return qkv_.input_needs(); }
  TensorView forward(Backend& be, Scratch& s, const LayerInput& in, const StepContext& ctx,
                     const KvCacheView& cache) const;
  size_t scratch_bytes(int64_t tokens) const;

  int64_t num_kv_heads() const { return num_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  // Whether the checkpoint gave this layer FP8 KV-cache scales (k_scale,
  // v_scale; 1.0 stands in for an absent one). An FP8 cache uses them.
  bool has_kv_scales() const { return has_kv_scales_; }

 private:
  Linear qkv_;
  Linear o_proj_;
  RowParallelSum o_sum_;  // o_proj is row-parallel under tensor parallelism
  TensorView q_norm_, k_norm_;
  Rotary rotary_;
  int64_t num_q_heads_ = 0, num_kv_heads_ = 0, head_dim_ = 0, hidden_ = 0;
  float eps_ = 1e-6f;
  float k_scale_ = 1.0f, v_scale_ = 1.0f;
  bool has_kv_scales_ = false;
};

}  // namespace hyllm
