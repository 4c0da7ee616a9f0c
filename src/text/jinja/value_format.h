#pragma once
// Text forms of values exactly as Python writes them: str() (what {{ x }}
// prints), repr() (elements inside printed lists and dicts), float repr, and
// json.dumps (transformers' tojson filter).

#include <string>

#include "text/jinja/value.h"

namespace hyllm::jinja {

// Python's repr(float): shortest round-trip digits, "1.0", "1e-05", "1e+16".
std::string format_float(double f);
// str(x) as jinja2 prints it; undefined prints as "".
std::string to_python_str(const Value& v);
void append_python_str(std::string& out, const Value& v);
std::string to_python_repr(const Value& v);

struct JsonOptions {
  // json.dumps(indent=...): < 0 means None (single line); otherwise that many
  // spaces per level, or indent_string when it is set.
  int indent = -1;
  std::string indent_string;
  bool use_indent_string = false;
  bool ensure_ascii = false;
  bool sort_keys = false;
  // Separators; empty means Python's default for the indent mode.
  bool custom_separators = false;
  std::string item_separator;
  std::string key_separator;
};

// json.dumps(v, ...). Fails for values JSON cannot hold (undefined, callables).
std::string to_json(const Value& v, const JsonOptions& options);

}  // namespace hyllm::jinja
