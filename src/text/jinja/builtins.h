#pragma once
// The builtin vocabulary: filters, tests, methods of str/dict/list, global
// functions, and the Python operators the evaluator applies. Each family lives
// in its own file; this header is the evaluator's view of them.

#include <initializer_list>
#include <string>
#include <string_view>

#include "text/jinja/evaluator.h"
#include "text/jinja/value.h"

namespace hyllm::jinja {

using FilterFn = Value (*)(Evaluator&, const Value& operand, CallArgs& args);
using TestFn = bool (*)(Evaluator&, const Value& operand, CallArgs& args);

// nullptr when unknown.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
// Builtin global functions (range, namespace, dict, raise_exception,
// strftime_now); undefined when unknown.
Value find_global(std::string_view name);
// obj.name for str, list, dict and namespace: a bound method, an entry, or
// undefined (jinja2's getattr semantics).
Value get_attribute(const Value& obj, const std::string& name);
// obj[key] (jinja2's getitem semantics).
Value get_item(const Value& obj, const Value& key);
Value get_slice(Evaluator& ev, const Value& obj, const Value& start, const Value& stop, const Value& step);

// The elements `for x in v` visits (dict: keys, string: characters).
ValueList iterate(const Value& v);
// len(v).
int64_t length_of(const Value& v);
// `item in container`.
bool contains(const Value& container, const Value& item);

// Python operators.
Value op_add(Evaluator& ev, const Value& a, const Value& b);
Value op_sub(const Value& a, const Value& b);
Value op_mul(Evaluator& ev, const Value& a, const Value& b);
Value op_div(const Value& a, const Value& b);
Value op_floordiv(const Value& a, const Value& b);
Value op_mod(Evaluator& ev, const Value& a, const Value& b);
Value op_pow(const Value& a, const Value& b);
Value op_neg(const Value& a);
// Python's "fmt % args" for strings.
std::string percent_format(const std::string& fmt, const Value& args);

// Raises the failure an undefined value carries (jinja2's UndefinedError).
[[noreturn]] void raise_undefined(const Value& v);

// Reads a builtin's arguments by position or keyword, Python style.
class ArgReader {
 public:
  ArgReader(std::string_view function, CallArgs& args, std::initializer_list<const char*> names);
  bool has(size_t i) const { return present_[i]; }
  const Value& get(size_t i) const { return values_[i]; }
  // Argument i, or `fallback` when it was not passed.
  Value get_or(size_t i, Value fallback) const { return present_[i] ? values_[i] : std::move(fallback); }
  int64_t get_int(size_t i, int64_t fallback) const;
  bool get_bool(size_t i, bool fallback) const;
  std::string get_string(size_t i, const std::string& fallback) const;

 private:
  std::string function_;
  std::vector<Value> values_;
  std::vector<bool> present_;
};

}  // namespace hyllm::jinja
