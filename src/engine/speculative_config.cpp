#include "engine/speculative_config.h"

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace hyllm {

SpeculativeConfig parse_speculative_config(std::string_view json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    fail(ErrorCode::kInvalidArgument, "--speculative-config must be a JSON object, e.g. "
         "'{{\"method\": \"mtp\", \"num_speculative_tokens\": 2}}'");
  for (const auto& [key, value] : j.items()) {
    if (key != "method" && key != "num_speculative_tokens")
      fail(ErrorCode::kInvalidArgument, "--speculative-config: key \"{}\" is not supported (hyllm drafts with the "
           "checkpoint's MTP head; the keys are \"method\" and \"num_speculative_tokens\")", key);
  }
  const auto method = j.find("method");
  if (method == j.end() || !method->is_string())
    fail(ErrorCode::kInvalidArgument, "--speculative-config: \"method\" (a string, \"mtp\") is required");
  const std::string m = method->get<std::string>();
  if (m != "mtp" && m != "qwen3_next_mtp")
    fail(ErrorCode::kInvalidArgument, "--speculative-config: method \"{}\" is not supported; hyllm supports \"mtp\" "
         "(the checkpoint's multi-token-prediction head)", m);
  const auto k = j.find("num_speculative_tokens");
  if (k == j.end() || !k->is_number_integer())
    fail(ErrorCode::kInvalidArgument, "--speculative-config: \"num_speculative_tokens\" (an integer from 1 to {}) "
         "is required", kMaxSpeculativeTokens);
  const int64_t n = k->get<int64_t>();
  if (n < 1 || n > kMaxSpeculativeTokens)
    fail(ErrorCode::kInvalidArgument, "--speculative-config: num_speculative_tokens must be from 1 to {}, got {}",
         kMaxSpeculativeTokens, n);
  SpeculativeConfig c;
  c.num_speculative_tokens = static_cast<int>(n);
  return c;
}

}  // namespace hyllm
