#include "serve/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "serve/api_error.h"

namespace hyllm::serve {

Json parse_request_json(std::string_view body) {
  // Depth first, by a scan: printing or copying deep values recurses. The
  // parser's own depth callback would do, but nlohmann's callback parser
  // rescans the enclosing container at every closing bracket, which makes a
  // long flat array of objects quadratic (minutes for a few megabytes).
  if (!json_depth_within(body)) {
    throw bad_request(fmt::format("JSON nesting deeper than {} levels", kMaxJsonDepth));
  }
  Json parsed;
  try {
    parsed = Json::parse(body.begin(), body.end());
  } catch (const Json::exception& e) {
    // parse_error for bad syntax, and out_of_range for a number beyond a
    // double (1e999): both are the client's, and callers that catch only
    // ApiError (run-batch's line parser) must see them as one.
    throw bad_request(fmt::format("Invalid JSON body: {}", e.what()));
  }
  if (!parsed.is_object()) throw bad_request("The request body must be a JSON object");
  return parsed;
}

std::optional<int64_t> json_integer(const Json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return std::nullopt;
    }
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    // 2^63 as a double is out of range; stay strictly below it.
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

bool FieldReader::has(const char* name) const { return get(name) != nullptr; }

std::vector<std::string> FieldReader::unread() const {
  std::vector<std::string> out;
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    if (!asked_.count(it.key())) out.push_back(it.key());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const Json* FieldReader::get(const char* name) const {
  if (asked_.find(std::string_view(name)) == asked_.end()) asked_.emplace(name);
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> FieldReader::boolean(const char* name) const {
  const auto* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw bad_request(fmt::format("`{}` must be a boolean", name), name);
  return v->get<bool>();
}

std::optional<int64_t> FieldReader::integer(const char* name) const {
  const auto* v = get(name);
  if (!v) return std::nullopt;
  auto i = json_integer(*v);
  if (!i) throw bad_request(fmt::format("`{}` must be an integer", name), name);
  return i;
}

std::optional<double> FieldReader::number(const char* name) const {
  const auto* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw bad_request(fmt::format("`{}` must be a number", name), name);
  double d = v->get<double>();
  if (!std::isfinite(d)) throw bad_request(fmt::format("`{}` must be finite", name), name);
  // Every number a request gives is kept as a float: past its range it would
  // become infinity there, and the error would name no field.
  if (std::fabs(d) > std::numeric_limits<float>::max()) {
    throw bad_request(fmt::format("`{}` is out of range, got {}", name, d), name);
  }
  return d;
}

std::optional<std::string> FieldReader::string(const char* name) const {
  const auto* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw bad_request(fmt::format("`{}` must be a string", name), name);
  return v->get<std::string>();
}

const Json* FieldReader::object(const char* name) const {
  const auto* v = get(name);
  if (v && !v->is_object()) throw bad_request(fmt::format("`{}` must be an object", name), name);
  return v;
}

const Json* FieldReader::array(const char* name) const {
  const auto* v = get(name);
  if (v && !v->is_array()) throw bad_request(fmt::format("`{}` must be a list", name), name);
  return v;
}

std::vector<std::string> FieldReader::string_or_list(const char* name, size_t max_items) const {
  const auto* v = get(name);
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) {
    throw bad_request(fmt::format("`{}` must be a string or a list of strings", name), name);
  }
  if (v->size() > max_items) {
    throw bad_request(fmt::format("`{}` has {} items; at most {} are allowed", name, v->size(), max_items),
                      name);
  }
  for (const auto& item : *v) {
    if (!item.is_string()) {
      throw bad_request(fmt::format("`{}` must be a string or a list of strings", name), name);
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::vector<int32_t> FieldReader::int_list(const char* name, size_t max_items) const {
  const auto* v = get(name);
  std::vector<int32_t> out;
  if (!v) return out;
  if (!v->is_array()) throw bad_request(fmt::format("`{}` must be a list of integers", name), name);
  if (v->size() > max_items) {
    throw bad_request(fmt::format("`{}` has {} items; at most {} are allowed", name, v->size(), max_items),
                      name);
  }
  out.reserve(v->size());
  for (const auto& item : *v) {
    auto i = json_integer(item);
    if (!i || *i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max()) {
      throw bad_request(fmt::format("`{}` must be a list of integers", name), name);
    }
    out.push_back(static_cast<int32_t>(*i));
  }
  return out;
}

}  // namespace hyllm::serve
