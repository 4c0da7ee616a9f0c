#include <cstdint>

#include "model/config/json_fields.h"
#include "model/config/model_config.h"

namespace hyllm {

using config_detail::JsonFields;

GenerationConfig parse_generation_config(const nlohmann::json& config, const std::string& source) {
  JsonFields f(config, source);
  GenerationConfig g;
  if (auto eos = f.opt_int_or_list("eos_token_id")) g.eos_token_ids = *eos;
  g.bos_token_id = f.opt_int("bos_token_id");
  g.pad_token_id = f.opt_int("pad_token_id");
  g.temperature = f.opt_number("temperature");
  g.top_p = f.opt_number("top_p");
  g.top_k = f.opt_int("top_k");
  g.repetition_penalty = f.opt_number("repetition_penalty");
  g.max_new_tokens = f.opt_int("max_new_tokens");
  g.do_sample = f.opt_bool("do_sample");
  if (g.temperature && *g.temperature < 0) fail(ErrorCode::kInvalidArgument, "{}: temperature must be >= 0", source);
  if (g.top_p && !(*g.top_p > 0 && *g.top_p <= 1)) fail(ErrorCode::kInvalidArgument, "{}: top_p must be in (0, 1]", source);
  if (g.repetition_penalty && !(*g.repetition_penalty > 0)) {
    fail(ErrorCode::kInvalidArgument, "{}: repetition_penalty must be positive", source);
  }
  // Both become every request's defaults (32-bit there): a bad one would
  // fail each request as if the client had sent it.
  if (g.top_k && (*g.top_k < -1 || *g.top_k > INT32_MAX)) {
    fail(ErrorCode::kInvalidArgument, "{}: top_k must be -1 or 0 (off) or a positive count, got {}", source, *g.top_k);
  }
  if (g.max_new_tokens && (*g.max_new_tokens < 1 || *g.max_new_tokens > INT32_MAX)) {
    fail(ErrorCode::kInvalidArgument, "{}: max_new_tokens must be a positive count, got {}", source,
         *g.max_new_tokens);
  }
  return g;
}

GenerationConfig load_generation_config(const std::filesystem::path& model_dir) {
  std::filesystem::path path = model_dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  return parse_generation_config(read_json_file(path), path.string());
}

}  // namespace hyllm
