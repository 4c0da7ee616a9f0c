#pragma once
// Typed reads of JSON object fields with errors that name the field and file.
// Internal to the config parser.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace hyllm::config_detail {

class JsonFields {
 public:
  // `obj` must outlive this. `where` is the file and, for nested objects, the
  // path inside it ("config.json: text_config").
  JsonFields(const nlohmann::json& obj, std::string where) : obj_(obj), where_(std::move(where)) {
    if (!obj_.is_object()) fail(ErrorCode::kCorruptData, "{}: expected a JSON object", where_);
  }

  const std::string& where() const { return where_; }
  bool has(const char* key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }
  const nlohmann::json* find(const char* key) const { return has(key) ? &obj_.at(key) : nullptr; }

  std::optional<int64_t> opt_int(const char* key) const {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) bad(key, "an integer", *v);
    return v->get<int64_t>();
  }
  std::optional<double> opt_number(const char* key) const {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) bad(key, "a number", *v);
    return v->get<double>();
  }
  std::optional<bool> opt_bool(const char* key) const {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) bad(key, "true or false", *v);
    return v->get<bool>();
  }
  std::optional<std::string> opt_string(const char* key) const {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad(key, "a string", *v);
    return v->get<std::string>();
  }
  // An integer or a list of integers (eos_token_id is either).
  std::optional<std::vector<int64_t>> opt_int_or_list(const char* key) const {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_integer()) return std::vector<int64_t>{v->get<int64_t>()};
    if (!v->is_array()) bad(key, "an integer or a list of integers", *v);
    std::vector<int64_t> out;
    for (const auto& e : *v) {
      if (!e.is_number_integer()) bad(key, "an integer or a list of integers", *v);
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  std::optional<std::vector<std::string>> opt_string_list(const char* key) const {
    const nlohmann::json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_array()) bad(key, "a list of strings", *v);
    std::vector<std::string> out;
    for (const auto& e : *v) {
      if (!e.is_string()) bad(key, "a list of strings", *v);
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  int64_t req_int(const char* key) const { return required(opt_int(key), key); }
  std::string req_string(const char* key) const { return required(opt_string(key), key); }

  // A positive integer field, required or defaulted.
  int64_t positive(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    std::optional<int64_t> v = opt_int(key);
    if (!v) v = fallback;
    int64_t x = required(v, key);
    if (x <= 0) fail(ErrorCode::kInvalidArgument, "{}: \"{}\" must be positive, got {}", where_, key, x);
    return x;
  }

  [[noreturn]] void bad(const char* key, const char* expected, const nlohmann::json& got) const {
    std::string text = got.dump();
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    fail(ErrorCode::kCorruptData, "{}: \"{}\" must be {}, got {}", where_, key, expected, text);
  }

 private:
  template <typename T>
  T required(std::optional<T> v, const char* key) const {
    if (!v) fail(ErrorCode::kCorruptData, "{}: required field \"{}\" is missing", where_, key);
    return *v;
  }

  const nlohmann::json& obj_;
  std::string where_;
};

}  // namespace hyllm::config_detail
