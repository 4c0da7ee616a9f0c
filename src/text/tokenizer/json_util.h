#pragma once
// Checked access to tokenizer.json fields: a missing or mistyped field is a
// kCorruptData error that names it, never a JSON exception.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hyllm::tokenizer_detail {

class Regex;

// j["type"] as a string ("what" names the object in errors).
std::string json_type(const nlohmann::json& j, std::string_view what);
const nlohmann::json& json_field(const nlohmann::json& j, const char* key, std::string_view what);
std::string json_string(const nlohmann::json& j, const char* key, std::string_view what);
// Missing or null gives the default.
bool json_bool(const nlohmann::json& j, const char* key, bool default_value);

// A tokenizers Pattern: {"String": literal} or {"Regex": oniguruma}.
Regex parse_pattern(const nlohmann::json& j);

}  // namespace hyllm::tokenizer_detail
