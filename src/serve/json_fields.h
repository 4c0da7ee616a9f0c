#pragma once
// Typed, validated reads of request JSON. Every malformed value becomes a 400
// ApiError that names the field; nulls count as absent (the OpenAI schema makes
// almost every field nullable).

#include "serve/json.h"
#include "util/json_depth.h"

#include <cstdint>
#include <optional>
#include <string>
#include <set>
#include <string_view>
#include <vector>

namespace hyllm::serve {

// Deeper JSON than this is refused while parsing: printing or copying deeply
// nested values recurses, and no OpenAI request needs more.
inline constexpr int kMaxJsonDepth = 64;

// Parses a request body; the top level must be an object. Deeper than
// kMaxJsonDepth is a 400.
Json parse_request_json(std::string_view body);

// Whether JSON `text` a request or the model gives nests no deeper than a
// request may (util/json_depth.h): checked before it is parsed.
inline bool json_depth_within(std::string_view text) { return hyllm::json_depth_within(text, kMaxJsonDepth); }

class FieldReader {
 public:
  explicit FieldReader(const Json& object) : obj_(object) {}

  // The object's keys that no read below has asked for, sorted: what a
  // request sent that the server ignored.
  std::vector<std::string> unread() const;

  bool has(const char* name) const;
  const Json* get(const char* name) const;  // nullptr when absent or null

  std::optional<bool> boolean(const char* name) const;
  // Integers; a float with no fraction (3.0) is accepted as pydantic does.
  std::optional<int64_t> integer(const char* name) const;
  std::optional<double> number(const char* name) const;  // finite
  std::optional<std::string> string(const char* name) const;
  const Json* object(const char* name) const;
  const Json* array(const char* name) const;

  // A string or a list of strings (stop); at most max_items items.
  std::vector<std::string> string_or_list(const char* name, size_t max_items) const;
  // A list of integers that fit in int32 (stop_token_ids); at most max_items.
  std::vector<int32_t> int_list(const char* name, size_t max_items) const;

 private:
  const Json& obj_;
  mutable std::set<std::string, std::less<>> asked_;  // every name a read asked for
};

// Integer value of a JSON number without fraction, else nullopt.
std::optional<int64_t> json_integer(const Json& v);

}  // namespace hyllm::serve
