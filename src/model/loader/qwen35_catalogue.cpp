#include "model/loader/qwen35_catalogue.h"

#include <fmt/format.h>

#include <algorithm>

namespace hyllm {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class Catalogue {
 public:
  explicit Catalogue(const ModelConfig& c) : c_(c) {}

  void param(std::string name, Shape shape, DType dtype) {
    out_.push_back({std::move(name), shape, dtype, TensorRole::kParameter, {}, false});
  }
  void param(std::string name, Shape shape) { param(std::move(name), shape, c_.dtype); }

  // A quantizable linear `module` with weight [rows, cols].
  void linear(const std::string& module, int64_t rows, int64_t cols) {
    TensorSpec w{module + ".weight", Shape{rows, cols}, c_.dtype, TensorRole::kLinearWeight, {}, false};
    if (!c_.is_quantized_module(module)) {
      out_.push_back(std::move(w));
      return;
    }
    w.dtype = DType::kF8E4M3;
    if (c_.quant.method == QuantMethod::kFp8Block) {
      const auto& b = c_.quant.weight_block_size;
      std::string s = module + ".weight_scale_inv";
      w.related = {s};
      out_.push_back(w);
      out_.push_back({s, Shape{ceil_div(rows, b[0]), ceil_div(cols, b[1])}, DType::kF32, TensorRole::kBlockScale,
                      {w.name}, false});
    } else {
      std::string ws = module + ".weight_scale", is = module + ".input_scale";
      w.related = {ws, is};
      out_.push_back(w);
      out_.push_back({ws, Shape{}, DType::kF32, TensorRole::kWeightScale, {w.name}, false});
      out_.push_back({is, Shape{}, DType::kF32, TensorRole::kInputScale, {w.name}, false});
    }
  }

  void attention(const std::string& p) {
    const int64_t H = c_.hidden_size, D = c_.head_dim;
    linear(p + "self_attn.q_proj", c_.q_proj_rows(), H);
    linear(p + "self_attn.k_proj", c_.num_key_value_heads * D, H);
    linear(p + "self_attn.v_proj", c_.num_key_value_heads * D, H);
    linear(p + "self_attn.o_proj", H, c_.num_attention_heads * D);
    param(p + "self_attn.q_norm.weight", Shape{D});
    param(p + "self_attn.k_norm.weight", Shape{D});
    if (c_.quant.method == QuantMethod::kModelOptFp8 && c_.quant.has_kv_cache_scales()) {
      for (const char* kv : {"self_attn.k_scale", "self_attn.v_scale"})
        out_.push_back({p + kv, Shape{}, DType::kF32, TensorRole::kKvScale, {}, true});
    }
  }

  void linear_attention(const std::string& p) {
    const int64_t H = c_.hidden_size, Hv = c_.linear_num_value_heads;
    linear(p + "linear_attn.in_proj_qkv", c_.linear_conv_dim(), H);
    linear(p + "linear_attn.in_proj_z", c_.linear_value_dim(), H);
    param(p + "linear_attn.in_proj_b.weight", Shape{Hv, H});
    param(p + "linear_attn.in_proj_a.weight", Shape{Hv, H});
    param(p + "linear_attn.conv1d.weight", Shape{c_.linear_conv_dim(), 1, c_.linear_conv_kernel_dim});
    param(p + "linear_attn.A_log", Shape{Hv}, DType::kF32);
    param(p + "linear_attn.dt_bias", Shape{Hv});
    param(p + "linear_attn.norm.weight", Shape{c_.linear_value_head_dim}, DType::kF32);
    linear(p + "linear_attn.out_proj", H, c_.linear_value_dim());
  }

  void dense_mlp(const std::string& p, int64_t inter) {
    linear(p + "gate_proj", inter, c_.hidden_size);
    linear(p + "up_proj", inter, c_.hidden_size);
    linear(p + "down_proj", c_.hidden_size, inter);
  }

  void moe(const std::string& p, ExpertLayout layout) {
    const int64_t H = c_.hidden_size, E = c_.num_experts, I = c_.moe_intermediate_size;
    param(p + "mlp.gate.weight", Shape{E, H});
    if (layout == ExpertLayout::kFused) {
      if (c_.is_quantized_module(p + "mlp.experts")) {
        fail(ErrorCode::kUnsupported, "fused MoE experts ({}mlp.experts.gate_up_proj) in FP8 are not supported; "
             "FP8 checkpoints store one tensor per expert", p);
      }
      out_.push_back({p + "mlp.experts.gate_up_proj", Shape{E, 2 * I, H}, c_.dtype, TensorRole::kParameter, {}, false});
      out_.push_back({p + "mlp.experts.down_proj", Shape{E, H, I}, c_.dtype, TensorRole::kParameter, {}, false});
    } else {
      for (int64_t e = 0; e < E; ++e) dense_mlp(fmt::format("{}mlp.experts.{}.", p, e), I);
    }
    dense_mlp(p + "mlp.shared_expert.", c_.shared_expert_intermediate_size);
    param(p + "mlp.shared_expert_gate.weight", Shape{1, H});
  }

  void decoder_layer(const std::string& p, bool full_attention, ExpertLayout layout) {
    const int64_t H = c_.hidden_size;
    param(p + "input_layernorm.weight", Shape{H});
    if (full_attention) attention(p);
    else linear_attention(p);
    param(p + "post_attention_layernorm.weight", Shape{H});
    if (c_.is_moe) moe(p, layout);
    else dense_mlp(p + "mlp.", c_.intermediate_size);
  }

  std::vector<TensorSpec> build(ExpertLayout layout) {
    const int64_t H = c_.hidden_size;
    param("embed_tokens.weight", Shape{c_.vocab_size, H});
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i)
      decoder_layer(fmt::format("layers.{}.", i), c_.layer_types[i] == LayerType::kFullAttention, layout);
    param("norm.weight", Shape{H});
    // lm_head is never quantized: vLLM builds it as an embedding-like layer
    // outside the FP8 linear path, and the official repos keep it in BF16.
    if (!c_.tie_word_embeddings) param("lm_head.weight", Shape{c_.vocab_size, H});
    const size_t first_mtp = out_.size();
    if (c_.mtp_num_hidden_layers > 0) {
      linear("mtp.fc", H, 2 * H);
      param("mtp.pre_fc_norm_embedding.weight", Shape{H});
      param("mtp.pre_fc_norm_hidden.weight", Shape{H});
      for (int64_t i = 0; i < c_.mtp_num_hidden_layers; ++i)
        decoder_layer(fmt::format("mtp.layers.{}.", i), /*full_attention=*/true, layout);
      param("mtp.norm.weight", Shape{H});
    }
    for (size_t i = first_mtp; i < out_.size(); ++i) out_[i].mtp = true;
    return std::move(out_);
  }

 private:
  const ModelConfig& c_;
  std::vector<TensorSpec> out_;
};

}  // namespace

const char* expert_layout_name(ExpertLayout l) { return l == ExpertLayout::kFused ? "fused" : "per-expert"; }

ExpertLayout default_expert_layout(const ModelConfig& config) {
  return config.quant.is_fp8() ? ExpertLayout::kPerExpert : ExpertLayout::kFused;
}

std::vector<std::string> qwen35_quantizable_linears(const ModelConfig& config) {
  ModelConfig unquantized = config;
  unquantized.quant = QuantConfig{};  // fused experts are refused in FP8 only
  std::vector<std::string> out;
  for (ExpertLayout layout : {ExpertLayout::kFused, ExpertLayout::kPerExpert}) {
    if (layout == ExpertLayout::kPerExpert && !config.is_moe) break;
    for (const TensorSpec& s : qwen35_expected_tensors(unquantized, layout)) {
      if (s.role == TensorRole::kLinearWeight) out.push_back(s.name.substr(0, s.name.size() - 7));  // ".weight"
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<TensorSpec> qwen35_expected_tensors(const ModelConfig& config, ExpertLayout experts) {
  HYLLM_CHECK(static_cast<int64_t>(config.layer_types.size()) == config.num_hidden_layers, "layer_types size");
  return Catalogue(config).build(experts);
}

}  // namespace hyllm
