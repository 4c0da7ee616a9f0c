#pragma once
// A parsed Jinja template, rendered under sandbox caps.
//
// The interpreter is hand-written: Debian ships no C++ Jinja engine, and chat
// templates need jinja2's exact output (whitespace control, Python value
// formatting, transformers' tojson), which a small dedicated interpreter can
// match byte for byte. There is no loader: include/import/extends fail, and no
// builtin reaches files, the network or the environment.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/jinja/evaluator.h"
#include "text/jinja/value.h"

namespace hyllm::jinja {

struct TemplateOptions {
  RenderLimits limits;
  int max_parse_nesting = 200;
  // When set, strftime_now formats this instant (Unix seconds, UTC) instead
  // of reading the local clock: reproducible prompts and tests.
  std::optional<int64_t> fixed_time;
};

using Variables = std::vector<std::pair<std::string, Value>>;

class Template {
 public:
  // Throws hyllm::Error: kCorruptData when the source does not parse,
  // kResourceExhausted when it nests beyond the cap.
  static Template parse(std::string_view source, const TemplateOptions& options = {});

  // Renders with `variables` as the top-level names (later entries win).
  // Throws hyllm::Error: kInvalidArgument when rendering fails (the message
  // gives line and column), kResourceExhausted when a cap is hit. Const and
  // safe to call from several threads at once.
  std::string render(const Variables& variables) const;

 private:
  std::shared_ptr<const Body> body_;
  TemplateOptions options_;
};

// JSON to template values; object key order is kept.
Value value_from_json(const nlohmann::ordered_json& j);

}  // namespace hyllm::jinja
