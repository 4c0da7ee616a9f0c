#include "model/config/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>

#include "model/config/json_fields.h"
#include "model/config/quant_parse.h"

namespace hyllm {

using config_detail::JsonFields;
using nlohmann::json;

namespace {

struct ArchInfo {
  const char* name;
  bool moe;
  bool nested;  // LM settings live in text_config
};
constexpr ArchInfo kArchs[] = {
    {"Qwen3_5ForConditionalGeneration", false, true},
    {"Qwen3_5MoeForConditionalGeneration", true, true},
    {"Qwen3_5ForCausalLM", false, false},
    {"Qwen3_5MoeForCausalLM", true, false},
};

const ArchInfo& pick_architecture(const JsonFields& top) {
  std::vector<std::string> archs = top.opt_string_list("architectures").value_or(std::vector<std::string>{});
  if (archs.empty()) {
    fail(ErrorCode::kCorruptData, "{}: required field \"architectures\" is missing or empty (supported: {})",
         top.where(), fmt::join(supported_architectures(), ", "));
  }
  for (const std::string& a : archs) {
    for (const ArchInfo& info : kArchs)
      if (a == info.name) return info;
  }
  fail(ErrorCode::kUnsupported, "{}: unsupported architecture {}; supported: {}", top.where(),
       fmt::join(archs, ", "), fmt::join(supported_architectures(), ", "));
}

DType parse_dtype_field(const JsonFields& f, const char* key, DType fallback) {
  std::optional<std::string> name = f.opt_string(key);
  if (!name) return fallback;
  std::optional<DType> t = dtype_from_torch_name(*name);
  if (!t) fail(ErrorCode::kUnsupported, "{}: \"{}\" = \"{}\" is not a supported dtype (bfloat16, float16, float32)",
               f.where(), key, *name);
  return *t;
}

std::vector<LayerType> parse_layer_types(const JsonFields& text, int64_t num_layers) {
  std::vector<LayerType> types;
  if (std::optional<std::vector<std::string>> names = text.opt_string_list("layer_types")) {
    for (const std::string& n : *names) {
      if (n == "linear_attention") types.push_back(LayerType::kLinearAttention);
      else if (n == "full_attention") types.push_back(LayerType::kFullAttention);
      else fail(ErrorCode::kUnsupported, "{}: layer_types entry \"{}\" is not linear_attention or full_attention",
                text.where(), n);
    }
    if (static_cast<int64_t>(types.size()) != num_layers) {
      fail(ErrorCode::kInvalidArgument, "{}: layer_types has {} entries but num_hidden_layers is {}", text.where(),
           types.size(), num_layers);
    }
    return types;
  }
  // Layer i is full attention iff (i + 1) % interval == 0 (HF's rule).
  int64_t interval = text.positive("full_attention_interval", 4);
  for (int64_t i = 0; i < num_layers; ++i)
    types.push_back((i + 1) % interval == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
  return types;
}

void parse_rope(const JsonFields& text, ModelConfig& c) {
  // transformers 5 groups everything under rope_parameters; older configs have
  // rope_theta / partial_rotary_factor at the top and mrope fields in rope_scaling.
  const json* params = text.find("rope_parameters");
  if (!params) params = text.find("rope_scaling");
  std::optional<JsonFields> rope;
  if (params) rope.emplace(*params, text.where() + ": " + (text.has("rope_parameters") ? "rope_parameters" : "rope_scaling"));

  auto number = [&](const char* key) -> std::optional<double> {
    if (rope) {
      if (auto v = rope->opt_number(key)) return v;
    }
    return text.opt_number(key);
  };
  if (rope) {
    if (auto t = rope->opt_string("rope_type")) c.rope_type = *t;
    else if (auto t2 = rope->opt_string("type")) c.rope_type = *t2;
    if (auto s = rope->opt_int_or_list("mrope_section")) c.mrope_section = *s;
    c.mrope_interleaved = rope->opt_bool("mrope_interleaved").value_or(false);
    c.rope_scaling_factor = rope->opt_number("factor");
    c.rope_original_max_position_embeddings = rope->opt_int("original_max_position_embeddings");
  }
  c.rope_theta = number("rope_theta").value_or(1e7);
  c.partial_rotary_factor = number("partial_rotary_factor").value_or(0.25);
  if (c.rope_theta <= 0) fail(ErrorCode::kInvalidArgument, "{}: rope_theta must be positive", text.where());
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1)) {
    fail(ErrorCode::kInvalidArgument, "{}: partial_rotary_factor must be in (0, 1], got {}", text.where(),
         c.partial_rotary_factor);
  }
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0) {
    fail(ErrorCode::kInvalidArgument, "{}: head_dim {} x partial_rotary_factor {} gives rotary dim {}, not a positive even number",
         text.where(), c.head_dim, c.partial_rotary_factor, c.rotary_dim);
  }
  // The kernels compute the default (m)RoPE: a scaled one (YaRN and its
  // kind) would be silently wrong past the original context.
  if ((c.rope_type != "default" && c.rope_type != "mrope") || c.rope_scaling_factor) {
    fail(ErrorCode::kUnsupported, "{}: rope_type \"{}\"{} is not supported (rope scaling); hyllm computes the default "
         "RoPE only",
         text.where(), c.rope_type,
         c.rope_scaling_factor ? fmt::format(" with factor {}", *c.rope_scaling_factor) : std::string());
  }
  if (!c.mrope_section.empty()) {
    for (int64_t s : c.mrope_section) {
      if (s < 0) {
        fail(ErrorCode::kInvalidArgument, "{}: mrope_section {} has a negative entry", text.where(),
             fmt::join(c.mrope_section, ","));
      }
    }
    int64_t sum = std::accumulate(c.mrope_section.begin(), c.mrope_section.end(), int64_t{0});
    if (sum * 2 != c.rotary_dim) {
      fail(ErrorCode::kInvalidArgument, "{}: mrope_section {} sums to {} but rotary_dim / 2 is {}", text.where(),
           fmt::join(c.mrope_section, ","), sum, c.rotary_dim / 2);
    }
  }
}

// Upper bounds far above any real model, so that derived sizes (products of
// up to three extents) stay well inside int64 and the tensor catalogue (one
// entry per expert per layer) inside memory: a hostile config is refused up
// front instead of exhausting the host while the model is planned.
constexpr int64_t kMaxExtent = int64_t{1} << 20;        // widths, heads, head dims, experts
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxLayerExperts = int64_t{1} << 20;  // num_hidden_layers x num_experts
constexpr int64_t kMaxPositions = int64_t{1} << 30;     // positions and lengths are 32-bit in the engine

int64_t at_most(const JsonFields& f, const char* key, int64_t value, int64_t max) {
  if (value > max) {
    fail(ErrorCode::kInvalidArgument, "{}: \"{}\" = {} is larger than hyllm supports ({})", f.where(), key, value,
         max);
  }
  return value;
}

void check_divides(const JsonFields& f, const char* small_key, int64_t small, const char* big_key, int64_t big) {
  if (big % small != 0) {
    fail(ErrorCode::kInvalidArgument, "{}: {} ({}) must be a multiple of {} ({})", f.where(), big_key, big, small_key,
         small);
  }
}

}  // namespace

const char* layer_type_name(LayerType t) {
  return t == LayerType::kFullAttention ? "full_attention" : "linear_attention";
}

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const ArchInfo& a : kArchs) v.emplace_back(a.name);
    return v;
  }();
  return kNames;
}

std::optional<DType> dtype_from_torch_name(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name == "bfloat16" || name == "bf16") return DType::kBF16;
  if (name == "float16" || name == "half" || name == "fp16") return DType::kF16;
  if (name == "float32" || name == "float" || name == "fp32") return DType::kF32;
  return std::nullopt;
}

int64_t ModelConfig::num_full_attention_layers() const {
  return std::count(layer_types.begin(), layer_types.end(), LayerType::kFullAttention);
}
int64_t ModelConfig::num_linear_attention_layers() const {
  return std::count(layer_types.begin(), layer_types.end(), LayerType::kLinearAttention);
}

std::string describe(const ModelConfig& c) {
  std::string mlp = c.is_moe ? fmt::format("{} experts top-{}", c.num_experts, c.num_experts_per_tok)
                             : fmt::format("intermediate {}", c.intermediate_size);
  return fmt::format("{}: {} layers ({} linear attention, {} full attention), hidden {}, vocab {}, {}, {}{}, {}",
                     c.architecture, c.num_hidden_layers, c.num_linear_attention_layers(),
                     c.num_full_attention_layers(), c.hidden_size, c.vocab_size, mlp, dtype_name(c.dtype),
                     c.tie_word_embeddings ? ", tied embeddings" : "", quant_method_name(c.quant.method));
}

ModelConfig parse_model_config(const json& config, const json* hf_quant_config, const std::string& source) {
  JsonFields top(config, source);
  const ArchInfo& arch = pick_architecture(top);
  const json* text_json = top.find("text_config");
  if (arch.nested && !text_json) {
    fail(ErrorCode::kCorruptData, "{}: {} needs a \"text_config\" object", source, arch.name);
  }
  JsonFields text(text_json ? *text_json : config, text_json ? source + ": text_config" : source);

  ModelConfig c;
  c.architecture = arch.name;
  c.is_moe = arch.moe;
  c.model_type = text.opt_string("model_type").value_or(top.opt_string("model_type").value_or(""));

  c.hidden_size = at_most(text, "hidden_size", text.positive("hidden_size"), kMaxExtent);
  c.num_hidden_layers = at_most(text, "num_hidden_layers", text.positive("num_hidden_layers"), kMaxLayers);
  c.vocab_size = at_most(text, "vocab_size", text.positive("vocab_size"), kMaxVocab);
  c.layer_types = parse_layer_types(text, c.num_hidden_layers);

  c.num_attention_heads = at_most(text, "num_attention_heads", text.positive("num_attention_heads"), kMaxExtent);
  c.num_key_value_heads = at_most(text, "num_key_value_heads", text.positive("num_key_value_heads"), kMaxExtent);
  c.head_dim = at_most(text, "head_dim", text.positive("head_dim", 256), kMaxExtent);
  c.attn_output_gate = text.opt_bool("attn_output_gate").value_or(true);
  check_divides(text, "num_key_value_heads", c.num_key_value_heads, "num_attention_heads", c.num_attention_heads);

  c.linear_num_key_heads = at_most(text, "linear_num_key_heads", text.positive("linear_num_key_heads"), kMaxExtent);
  c.linear_num_value_heads =
      at_most(text, "linear_num_value_heads", text.positive("linear_num_value_heads"), kMaxExtent);
  c.linear_key_head_dim = at_most(text, "linear_key_head_dim", text.positive("linear_key_head_dim", 128), kMaxExtent);
  c.linear_value_head_dim =
      at_most(text, "linear_value_head_dim", text.positive("linear_value_head_dim", 128), kMaxExtent);
  c.linear_conv_kernel_dim =
      at_most(text, "linear_conv_kernel_dim", text.positive("linear_conv_kernel_dim", 4), kMaxExtent);
  check_divides(text, "linear_num_key_heads", c.linear_num_key_heads, "linear_num_value_heads",
                c.linear_num_value_heads);

  if (c.is_moe) {
    c.num_experts =
        at_most(text, "num_experts", text.positive("num_experts"), kMaxLayerExperts / c.num_hidden_layers);
    c.num_experts_per_tok = text.positive("num_experts_per_tok");
    c.moe_intermediate_size =
        at_most(text, "moe_intermediate_size", text.positive("moe_intermediate_size"), kMaxExtent);
    c.shared_expert_intermediate_size = at_most(text, "shared_expert_intermediate_size",
                                                text.positive("shared_expert_intermediate_size"), kMaxExtent);
    c.norm_topk_prob = text.opt_bool("norm_topk_prob").value_or(true);
    if (c.num_experts_per_tok > c.num_experts) {
      fail(ErrorCode::kInvalidArgument, "{}: num_experts_per_tok ({}) exceeds num_experts ({})", text.where(),
           c.num_experts_per_tok, c.num_experts);
    }
    if (auto dense_layers = text.find("mlp_only_layers"); dense_layers && !dense_layers->empty()) {
      fail(ErrorCode::kUnsupported, "{}: mlp_only_layers (dense layers inside a MoE model) is not supported",
           text.where());
    }
  } else {
    c.intermediate_size = at_most(text, "intermediate_size", text.positive("intermediate_size"), kMaxExtent);
  }

  c.rms_norm_eps = text.opt_number("rms_norm_eps").value_or(1e-6);
  if (!(c.rms_norm_eps > 0)) fail(ErrorCode::kInvalidArgument, "{}: rms_norm_eps must be positive", text.where());
  parse_rope(text, c);
  // What Qwen3.5 fixes and the kernels assume: a field saying otherwise would
  // be ignored, and the model computed would not be the checkpoint's.
  if (auto act = text.opt_string("hidden_act"); act && *act != "silu" && *act != "swish") {
    fail(ErrorCode::kUnsupported, "{}: hidden_act \"{}\" is not supported (Qwen3.5 uses silu)", text.where(), *act);
  }
  if (text.opt_bool("attention_bias").value_or(false)) {
    fail(ErrorCode::kUnsupported, "{}: attention_bias true is not supported (Qwen3.5's attention has no biases)",
         text.where());
  }
  c.max_position_embeddings =
      at_most(text, "max_position_embeddings", text.positive("max_position_embeddings", 262144), kMaxPositions);

  // The composite config's top-level flag governs the LM head of the nested form.
  std::optional<bool> tie = top.opt_bool("tie_word_embeddings");
  if (!tie) tie = text.opt_bool("tie_word_embeddings");
  c.tie_word_embeddings = tie.value_or(false);
  if (auto mtp = text.opt_int("mtp_num_hidden_layers")) {
    if (*mtp < 0 || *mtp > kMaxLayers)
      fail(ErrorCode::kInvalidArgument, "{}: mtp_num_hidden_layers must be in [0, {}], got {}", text.where(),
           kMaxLayers, *mtp);
    c.mtp_num_hidden_layers = *mtp;
  }

  DType top_dtype = parse_dtype_field(top, "torch_dtype", DType::kBF16);
  top_dtype = parse_dtype_field(top, "dtype", top_dtype);
  c.dtype = parse_dtype_field(text, "torch_dtype", top_dtype);
  c.dtype = parse_dtype_field(text, "dtype", c.dtype);
  c.mamba_ssm_dtype = parse_dtype_field(text, "mamba_ssm_dtype", DType::kF32);

  if (auto eos = text.opt_int_or_list("eos_token_id")) c.eos_token_ids = *eos;
  else if (auto eos_top = top.opt_int_or_list("eos_token_id")) c.eos_token_ids = *eos_top;

  const json* qc = top.find("quantization_config");
  std::string qc_where = source + ": quantization_config";
  if (!qc && text_json) {
    qc = text.find("quantization_config");
    qc_where = source + ": text_config.quantization_config";
  }
  c.quant = config_detail::parse_quant_config(qc, qc_where, hf_quant_config);
  return c;
}

json read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(ErrorCode::kNotFound, "{}: no such file", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kIo, "{}: cannot open", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(ErrorCode::kCorruptData, "{}: not valid JSON", path.string());
  return j;
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  std::filesystem::path config_path = model_dir / "config.json";
  json config = read_json_file(config_path);
  std::filesystem::path hf_quant_path = model_dir / "hf_quant_config.json";
  std::error_code ec;
  if (std::filesystem::exists(hf_quant_path, ec)) {
    json hf_quant = read_json_file(hf_quant_path);
    return parse_model_config(config, &hf_quant, config_path.string());
  }
  return parse_model_config(config, nullptr, config_path.string());
}

}  // namespace hyllm
