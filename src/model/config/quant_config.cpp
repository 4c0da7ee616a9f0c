#include <fmt/format.h>

#include "model/config/json_fields.h"
#include "model/config/model_config.h"
#include "model/config/quant_parse.h"

namespace hyllm {

using config_detail::JsonFields;
using nlohmann::json;

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::kNone: return "none";
    case QuantMethod::kFp8Block: return "fp8_block";
    case QuantMethod::kModelOptFp8: return "modelopt_fp8";
  }
  return "?";
}

std::string canonical_module_name(std::string_view name) {
  for (std::string_view prefix : {"model.language_model.", "model."}) {
    if (name.starts_with(prefix)) {
      name.remove_prefix(prefix.size());
      break;
    }
  }
  return std::string(name);
}

namespace config_detail {

bool glob_match(std::string_view text, std::string_view pattern) {
  // Iterative matcher with single-star backtracking: linear in practice and
  // never recursive, so hostile patterns cannot blow the stack.
  size_t t = 0, p = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++t;
      ++p;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// A pattern without wildcards names a module, a module's parent, or a module
// suffix ("lm_head", "layers.0.linear_attn", "mlp.gate"): this is how HF's
// modules_to_not_convert is read. Whole dotted components only, so "mlp.gate"
// does not exclude "mlp.gate_proj".
bool module_pattern_matches(std::string_view module, std::string_view pattern) {
  if (pattern.find_first_of("*?") != std::string_view::npos) {
    return glob_match(module, pattern) || glob_match(module, std::string(pattern) + ".*");
  }
  if (module == pattern) return true;
  if (module.size() > pattern.size()) {
    if (module.starts_with(pattern) && module[pattern.size()] == '.') return true;
    if (module.ends_with(pattern) && module[module.size() - pattern.size() - 1] == '.') return true;
  }
  return false;
}

namespace {

std::vector<std::string> canonical_patterns(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const std::string& p : patterns) out.push_back(canonical_module_name(p));
  return out;
}

std::string kv_algo_from_scheme(const JsonFields& f, const char* key) {
  const json* v = f.find(key);
  if (!v) return "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) {
    // compressed-tensors style {"num_bits": 8, "type": "float", ...}
    JsonFields s(*v, f.where() + "." + key);
    if (s.opt_int("num_bits") == 8 && s.opt_string("type").value_or("float") == "float") return "FP8";
    fail(ErrorCode::kUnsupported, "{}: \"{}\" describes a KV-cache format other than FP8", f.where(), key);
  }
  f.bad(key, "a string, an object or null", *v);
}

void check_kv_algo(const std::string& algo, const std::string& where) {
  if (!algo.empty() && algo != "FP8") {
    fail(ErrorCode::kUnsupported, "{}: kv_cache_quant_algo \"{}\" is not supported (only FP8)", where, algo);
  }
}

QuantConfig parse_qwen_fp8(const JsonFields& f) {
  QuantConfig q;
  q.method = QuantMethod::kFp8Block;
  std::string fmt_name = f.opt_string("fmt").value_or("e4m3");
  if (fmt_name != "e4m3") fail(ErrorCode::kUnsupported, "{}: fp8 fmt \"{}\" is not supported (only e4m3)", f.where(), fmt_name);
  const json* block = f.find("weight_block_size");
  if (!block) {
    fail(ErrorCode::kUnsupported, "{}: fp8 without \"weight_block_size\" (per-tensor dynamic FP8) is not supported",
         f.where());
  }
  if (!block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() ||
      !(*block)[1].is_number_integer() || (*block)[0].get<int64_t>() <= 0 || (*block)[1].get<int64_t>() <= 0) {
    f.bad("weight_block_size", "a list of two positive integers", *block);
  }
  q.weight_block_size = {(*block)[0].get<int64_t>(), (*block)[1].get<int64_t>()};
  if (q.weight_block_size[0] != 128 || q.weight_block_size[1] != 128) {
    // Every Qwen and DeepSeek-style block-FP8 checkpoint uses 128 x 128, and
    // so do the block-scaled GEMMs (cuBLASLt's BLK128x128 scale mode).
    fail(ErrorCode::kUnsupported, "{}: weight_block_size [{}, {}] is not supported (only [128, 128])", f.where(),
         q.weight_block_size[0], q.weight_block_size[1]);
  }
  q.activation_scheme = f.opt_string("activation_scheme").value_or("dynamic");
  if (q.activation_scheme != "dynamic") {
    fail(ErrorCode::kUnsupported, "{}: block fp8 with activation_scheme \"{}\" is not supported (only dynamic)",
         f.where(), q.activation_scheme);
  }
  std::vector<std::string> excluded = f.opt_string_list("modules_to_not_convert").value_or(std::vector<std::string>{});
  for (std::string& s : f.opt_string_list("ignored_layers").value_or(std::vector<std::string>{})) excluded.push_back(s);
  q.excluded_modules = canonical_patterns(excluded);
  return q;
}

QuantConfig parse_modelopt(const JsonFields& f) {
  QuantConfig q;
  q.method = QuantMethod::kModelOptFp8;
  q.activation_scheme = "static";
  std::string algo = f.req_string("quant_algo");
  if (algo != "FP8") {
    fail(ErrorCode::kUnsupported, "{}: ModelOpt quant_algo \"{}\" is not supported (only FP8, static per-tensor)",
         f.where(), algo);
  }
  std::vector<std::string> excluded = f.opt_string_list("exclude_modules").value_or(std::vector<std::string>{});
  for (std::string& s : f.opt_string_list("ignore").value_or(std::vector<std::string>{})) excluded.push_back(s);
  q.excluded_modules = canonical_patterns(excluded);
  q.kv_cache_quant_algo = f.has("kv_cache_quant_algo") ? f.req_string("kv_cache_quant_algo")
                                                       : kv_algo_from_scheme(f, "kv_cache_scheme");
  check_kv_algo(q.kv_cache_quant_algo, f.where());
  return q;
}

}  // namespace

QuantConfig parse_quant_config(const json* qc, const std::string& where, const json* hf_quant) {
  if (qc) {
    JsonFields f(*qc, where);
    std::string method = f.req_string("quant_method");
    if (method == "fp8") return parse_qwen_fp8(f);
    if (method == "modelopt") {
      // Some exports nest the ModelOpt fields under "quantization".
      if (const json* inner = f.find("quantization")) return parse_modelopt(JsonFields(*inner, where + ".quantization"));
      return parse_modelopt(f);
    }
    fail(ErrorCode::kUnsupported, "{}: quant_method \"{}\" is not supported (supported: fp8 with weight_block_size, modelopt FP8)",
         where, method);
  }
  if (hf_quant) {
    JsonFields f(*hf_quant, "hf_quant_config.json");
    if (const json* producer = f.find("producer")) {
      JsonFields p(*producer, "hf_quant_config.json: producer");
      std::string name = p.opt_string("name").value_or("modelopt");
      if (name != "modelopt") {
        fail(ErrorCode::kUnsupported, "hf_quant_config.json: producer \"{}\" is not supported (only modelopt)", name);
      }
    }
    const json* inner = f.find("quantization");
    if (!inner) fail(ErrorCode::kCorruptData, "hf_quant_config.json: required field \"quantization\" is missing");
    return parse_modelopt(JsonFields(*inner, "hf_quant_config.json: quantization"));
  }
  return {};
}

}  // namespace config_detail

bool ModelConfig::is_quantized_module(std::string_view module) const {
  if (!quant.is_fp8()) return false;
  std::string name = canonical_module_name(module);
  for (const std::string& pattern : quant.excluded_modules) {
    if (config_detail::module_pattern_matches(name, pattern)) return false;
  }
  return true;
}

}  // namespace hyllm
