#pragma once
// Typed model configuration, parsed once from a Hugging Face model directory.
//
//   ModelConfig cfg = load_model_config(dir);        // config.json (+ hf_quant_config.json)
//   GenerationConfig gen = load_generation_config(dir);  // generation_config.json, optional
//
// Supported architectures: Qwen3_5ForConditionalGeneration and
// Qwen3_5MoeForConditionalGeneration (LM settings nested in `text_config`), and
// the flat Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM. Anything else is
// ErrorCode::kUnsupported with the supported list in the message. A missing or
// mistyped required field is kCorruptData naming the field and the file; a
// value that parses but cannot describe a working model (heads not dividing,
// layer_types of the wrong length, ...) is kInvalidArgument.
//
// Quantization (QuantConfig):
//   - kFp8Block: Qwen's fine-grained FP8 (config.json quantization_config with
//     quant_method "fp8", weight_block_size [128,128], dynamic activations).
//     Quantized linears carry `weight_scale_inv` [ceil(N/bn), ceil(K/bk)].
//   - kModelOptFp8: NVIDIA ModelOpt static per-tensor FP8 (config.json
//     quantization_config quant_method "modelopt", or hf_quant_config.json).
//     Quantized linears carry scalar `weight_scale` and `input_scale`;
//     attention layers may carry `k_scale` / `v_scale` when kv_cache_quant_algo
//     is "FP8".
// Module names given to is_quantized_module() are canonical (see
// canonical_module_name): "layers.3.self_attn.q_proj", "lm_head".

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"
#include "util/status.h"

namespace hyllm {

enum class LayerType : uint8_t { kLinearAttention, kFullAttention };
const char* layer_type_name(LayerType t);  // "linear_attention" / "full_attention"

enum class QuantMethod : uint8_t { kNone, kFp8Block, kModelOptFp8 };
const char* quant_method_name(QuantMethod m);  // "none", "fp8_block", "modelopt_fp8"

struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  // kFp8Block: block extents [rows (N), cols (K)] of one weight scale.
  std::array<int64_t, 2> weight_block_size{128, 128};
  // "dynamic" (kFp8Block) or "static" (kModelOptFp8).
  std::string activation_scheme;
  // Modules kept unquantized: Qwen's modules_to_not_convert or ModelOpt's
  // exclude_modules / ignore, canonicalized (prefixes stripped). A pattern
  // may contain '*' wildcards.
  std::vector<std::string> excluded_modules;
  // ModelOpt: "FP8" when the checkpoint calibrated KV-cache scales; empty when none.
  std::string kv_cache_quant_algo;

  bool is_fp8() const { return method != QuantMethod::kNone; }
  bool has_kv_cache_scales() const { return kv_cache_quant_algo == "FP8"; }
};

struct ModelConfig {
  std::string architecture;  // e.g. "Qwen3_5MoeForConditionalGeneration"
  std::string model_type;    // of the LM config: "qwen3_5_text", "qwen3_5_moe_text", ...
  bool is_moe = false;

  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t vocab_size = 0;
  std::vector<LayerType> layer_types;  // one per layer; dispatch from this

  // Full (gated) attention.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 256;
  bool attn_output_gate = true;  // q_proj rows per head: [q(head_dim) || gate(head_dim)]

  // Gated DeltaNet (linear attention).
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 128;
  int64_t linear_value_head_dim = 128;
  int64_t linear_conv_kernel_dim = 4;

  // Dense MLP (0 for MoE models).
  int64_t intermediate_size = 0;
  // MoE (0 for dense models).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = true;

  double rms_norm_eps = 1e-6;
  // RoPE (rope_parameters, or the legacy rope_theta / rope_scaling keys).
  std::string rope_type = "default";
  double rope_theta = 1e7;
  double partial_rotary_factor = 0.25;
  int64_t rotary_dim = 64;              // head_dim * partial_rotary_factor, even
  std::vector<int64_t> mrope_section;   // sums to rotary_dim / 2 when present
  bool mrope_interleaved = false;
  std::optional<double> rope_scaling_factor;                  // yarn & co.
  std::optional<int64_t> rope_original_max_position_embeddings;
  int64_t max_position_embeddings = 0;

  bool tie_word_embeddings = false;
  // Multi-token prediction layers after the decoder (mtp.layers.*, one full
  // attention layer each); they share embed_tokens and lm_head.
  int64_t mtp_num_hidden_layers = 0;
  DType dtype = DType::kBF16;            // torch_dtype / dtype
  DType mamba_ssm_dtype = DType::kF32;   // GDN recurrent state
  std::vector<int64_t> eos_token_ids;    // from config.json; generation_config may add more

  QuantConfig quant;

  // Derived sizes.
  int64_t num_full_attention_layers() const;
  int64_t num_linear_attention_layers() const;
  int64_t q_proj_rows() const { return num_attention_heads * head_dim * (attn_output_gate ? 2 : 1); }
  int64_t linear_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t linear_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t linear_conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }

  // True when the linear `module` (canonical name, e.g. "layers.0.mlp.down_proj")
  // is FP8 per the quant config: quantization is on and no exclude pattern
  // matches. Whether a module is a linear that can be quantized at all is
  // the tensor catalogue's business, not this function's.
  bool is_quantized_module(std::string_view module) const;
};

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_new_tokens;
  std::optional<bool> do_sample;
};

// One line for logs: "Qwen3_5MoeForConditionalGeneration: 40 layers (30 linear
// attention, 10 full attention), hidden 2048, vocab 248320, 256 experts top-8,
// bfloat16, fp8_block".
std::string describe(const ModelConfig& config);

// The architectures parse_model_config accepts.
const std::vector<std::string>& supported_architectures();

// Reads `model_dir`/config.json and, when present, `model_dir`/hf_quant_config.json.
ModelConfig load_model_config(const std::filesystem::path& model_dir);

// Parses already-read JSON. `source` names the file in error messages.
ModelConfig parse_model_config(const nlohmann::json& config,
                               const nlohmann::json* hf_quant_config = nullptr,
                               const std::string& source = "config.json");

// Reads `model_dir`/generation_config.json; an absent file gives an empty config.
GenerationConfig load_generation_config(const std::filesystem::path& model_dir);
GenerationConfig parse_generation_config(const nlohmann::json& config,
                                         const std::string& source = "generation_config.json");

// Reads and parses a JSON file: kNotFound when absent, kCorruptData when malformed.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Strips the HF prefixes "model.language_model." and "model." so that module
// and tensor names are layout-independent: "model.language_model.layers.3.mlp"
// -> "layers.3.mlp", "lm_head" -> "lm_head".
std::string canonical_module_name(std::string_view name);

// Parses "bfloat16", "float16", "float32" (also "torch.bfloat16", "bf16", "half", ...).
std::optional<DType> dtype_from_torch_name(std::string_view name);

}  // namespace hyllm
