#include "text/tokenizer/json_util.h"

#include "text/tokenizer/regex.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {

std::string json_type(const nlohmann::json& j, std::string_view what) {
  if (!j.is_object()) fail(ErrorCode::kCorruptData, "tokenizer.json: {} is not an object", what);
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) {
    fail(ErrorCode::kCorruptData, "tokenizer.json: {} has no \"type\" string", what);
  }
  return it->get<std::string>();
}

const nlohmann::json& json_field(const nlohmann::json& j, const char* key, std::string_view what) {
  if (!j.is_object()) fail(ErrorCode::kCorruptData, "tokenizer.json: {} is not an object", what);
  auto it = j.find(key);
  if (it == j.end()) fail(ErrorCode::kCorruptData, "tokenizer.json: {} lacks field \"{}\"", what, key);
  return *it;
}

std::string json_string(const nlohmann::json& j, const char* key, std::string_view what) {
  const auto& v = json_field(j, key, what);
  if (!v.is_string()) fail(ErrorCode::kCorruptData, "tokenizer.json: {}.{} is not a string", what, key);
  return v.get<std::string>();
}

bool json_bool(const nlohmann::json& j, const char* key, bool default_value) {
  if (!j.is_object()) return default_value;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return default_value;
  if (!it->is_boolean()) fail(ErrorCode::kCorruptData, "tokenizer.json: field \"{}\" is not a boolean", key);
  return it->get<bool>();
}

Regex parse_pattern(const nlohmann::json& j) {
  if (j.is_object()) {
    if (auto it = j.find("Regex"); it != j.end() && it->is_string()) {
      return Regex::from_oniguruma(it->get<std::string>());
    }
    if (auto it = j.find("String"); it != j.end() && it->is_string()) {
      return Regex::literal(it->get<std::string>());
    }
  }
  fail(ErrorCode::kCorruptData, "tokenizer.json: pattern {} is neither {{\"String\"}} nor {{\"Regex\"}}",
       j.dump().substr(0, 200));
}

}  // namespace hyllm::tokenizer_detail
