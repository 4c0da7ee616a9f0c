#pragma once
// The tensors a Qwen3.5 / Qwen3.6 language model needs, by canonical name
// (see weight_source.h), with shapes and the dtypes the dummy source makes.
//
// The quantizable linears (q/k/v/o_proj, in_proj_qkv, in_proj_z, out_proj,
// dense MLP and shared-expert gate/up/down, routed experts) are FP8 e4m3 when
// config.is_quantized_module() says so, each with its scales:
//   kFp8Block:    <module>.weight_scale_inv  fp32 [ceil(N/bn), ceil(K/bk)]
//   kModelOptFp8: <module>.weight_scale, <module>.input_scale  fp32 scalars (shape [])
// plus, for ModelOpt with kv_cache_quant_algo FP8, the optional per-layer
// self_attn.k_scale / self_attn.v_scale scalars. Everything else (embeddings,
// norms, conv1d, in_proj_a/b, A_log, dt_bias, router, shared_expert_gate
// and lm_head) stays in the model dtype, except A_log and the GDN norm weight (fp32, as
// Qwen3.5 stores them).

#include <string>
#include <vector>

#include "model/config/model_config.h"
#include "tensor/shape.h"

namespace hyllm {

// How the routed experts of a MoE layer are stored.
enum class ExpertLayout : uint8_t {
  kFused,      // mlp.experts.gate_up_proj [E, 2I, H] (rows [gate | up]) and mlp.experts.down_proj [E, H, I]
  kPerExpert,  // mlp.experts.{e}.{gate,up}_proj.weight [I, H], mlp.experts.{e}.down_proj.weight [H, I]
};
const char* expert_layout_name(ExpertLayout l);

enum class TensorRole : uint8_t {
  kParameter,     // a plain weight (norm, embedding, conv, A_log, ...)
  kLinearWeight,  // a quantizable linear weight: FP8 or model dtype
  kBlockScale,    // weight_scale_inv of a block-FP8 linear
  kWeightScale,   // per-tensor weight_scale (ModelOpt)
  kInputScale,    // per-tensor static activation scale (ModelOpt)
  kKvScale,       // k_scale / v_scale of an attention layer (ModelOpt, optional)
};

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::kBF16;
  TensorRole role = TensorRole::kParameter;
  // For scales: the weight they belong to. For a quantized linear weight: its
  // scale tensors. Empty otherwise.
  std::vector<std::string> related;
  bool optional = false;  // KV scales only
  // Part of the MTP head (mtp.*): a checkpoint holds all of the head or none
  // of it (many repos strip it); the model loads it only for speculative decoding.
  bool mtp = false;
  bool quantized() const { return role == TensorRole::kLinearWeight && dtype == DType::kF8E4M3; }
};

// The default layout: the official repos store experts fused in BF16 and per
// expert in FP8.
ExpertLayout default_expert_layout(const ModelConfig& config);

// In model order: embed_tokens, layers 0..L-1, norm, lm_head (absent when
// tied), then the MTP head when config.mtp_num_hidden_layers > 0: mtp.fc
// [H, 2H], mtp.pre_fc_norm_embedding / pre_fc_norm_hidden / norm [H], and
// mtp.layers.{i}.* as full-attention decoder layers (dense MLP or MoE).
// Throws kUnsupported for fused experts in FP8 (no checkpoint is known to use it).
std::vector<TensorSpec> qwen35_expected_tensors(const ModelConfig& config, ExpertLayout experts);
inline std::vector<TensorSpec> qwen35_expected_tensors(const ModelConfig& config) {
  return qwen35_expected_tensors(config, default_expert_layout(config));
}

// The modules ("layers.0.mlp.down_proj", "layers.0.mlp.experts.3.up_proj")
// of every quantizable linear, in either expert layout: what FP8 checkpoints
// quantize and what --quantization fp8 quantizes online. lm_head, the
// embeddings, in_proj_a/b, the router and shared_expert_gate are not among
// them.
std::vector<std::string> qwen35_quantizable_linears(const ModelConfig& config);

}  // namespace hyllm
