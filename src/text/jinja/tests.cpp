// jinja2's builtin tests (`x is defined`, `x is divisibleby 3` ...).

#include <string_view>
#include <utility>

#include "text/jinja/builtins.h"
#include "text/jinja/errors.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

namespace {

const Value& one_arg(CallArgs& args, const char* name) {
  if (args.positional.size() != 1 || !args.keyword.empty())
    render_fail("test '{}' takes exactly one argument", name);
  return args.positional[0];
}

void no_args(CallArgs& args, const char* name) {
  if (!args.positional.empty() || !args.keyword.empty()) render_fail("test '{}' takes no arguments", name);
}

Value modulo(Evaluator& ev, const Value& v, int64_t m) { return op_mod(ev, v, Value::integer(m)); }

bool same_as(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kNone:
    case ValueKind::kUndefined: return true;
    case ValueKind::kBool:
    case ValueKind::kInt:
    case ValueKind::kFloat:
    case ValueKind::kString: return values_equal(a, b);
    case ValueKind::kList: return &a.list_data() == &b.list_data();
    case ValueKind::kDict:
    case ValueKind::kNamespace: return &a.dict_data() == &b.dict_data();
    case ValueKind::kCallable: return &a.callable_data() == &b.callable_data();
    case ValueKind::kObject: return &a.object_data() == &b.object_data();
  }
  return false;
}

bool cased(const Value& v, bool upper) {
  std::string s = to_python_str(v);
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c = utf8::next(s, i);
    if (utf8::is_upper(c)) {
      if (!upper) return false;
      any = true;
    } else if (utf8::is_lower(c)) {
      if (upper) return false;
      any = true;
    }
  }
  return any;
}

const std::pair<const char*, TestFn> kTests[] = {
    {"defined", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "defined"); return !v.is_undefined(); }},
    {"undefined", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "undefined"); return v.is_undefined(); }},
    {"none", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "none"); return v.is_none(); }},
    {"boolean", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "boolean"); return v.is_bool(); }},
    {"true", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "true"); return v.is_bool() && v.as_bool(); }},
    {"false", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "false"); return v.is_bool() && !v.as_bool(); }},
    {"string", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "string"); return v.is_string(); }},
    {"number", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "number"); return v.is_number(); }},
    {"integer", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "integer"); return v.is_int(); }},
    {"float", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "float"); return v.is_float(); }},
    {"mapping", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "mapping"); return v.is_dict(); }},
    {"iterable", [](Evaluator&, const Value& v, CallArgs& a) {
       no_args(a, "iterable");
       return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }},
    {"sequence", [](Evaluator&, const Value& v, CallArgs& a) {
       no_args(a, "sequence");
       return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }},
    {"callable", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "callable"); return v.is_callable(); }},
    {"odd", [](Evaluator& ev, const Value& v, CallArgs& a) { no_args(a, "odd"); return values_equal(modulo(ev, v, 2), Value::integer(1)); }},
    {"even", [](Evaluator& ev, const Value& v, CallArgs& a) { no_args(a, "even"); return values_equal(modulo(ev, v, 2), Value::integer(0)); }},
    {"divisibleby", [](Evaluator& ev, const Value& v, CallArgs& a) {
       const Value& n = one_arg(a, "divisibleby");
       return values_equal(op_mod(ev, v, n), Value::integer(0)); }},
    {"lower", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "lower"); return cased(v, false); }},
    {"upper", [](Evaluator&, const Value& v, CallArgs& a) { no_args(a, "upper"); return cased(v, true); }},
    {"escaped", [](Evaluator&, const Value&, CallArgs& a) { no_args(a, "escaped"); return false; }},
    {"sameas", [](Evaluator&, const Value& v, CallArgs& a) { return same_as(v, one_arg(a, "sameas")); }},
    {"in", [](Evaluator&, const Value& v, CallArgs& a) { return contains(one_arg(a, "in"), v); }},
    {"eq", [](Evaluator&, const Value& v, CallArgs& a) { return values_equal(v, one_arg(a, "eq")); }},
    {"equalto", [](Evaluator&, const Value& v, CallArgs& a) { return values_equal(v, one_arg(a, "equalto")); }},
    {"==", [](Evaluator&, const Value& v, CallArgs& a) { return values_equal(v, one_arg(a, "==")); }},
    {"ne", [](Evaluator&, const Value& v, CallArgs& a) { return !values_equal(v, one_arg(a, "ne")); }},
    {"!=", [](Evaluator&, const Value& v, CallArgs& a) { return !values_equal(v, one_arg(a, "!=")); }},
    {"lt", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, "lt")) < 0; }},
    {"lessthan", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, "lessthan")) < 0; }},
    {"<", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, "<")) < 0; }},
    {"le", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, "le")) <= 0; }},
    {"<=", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, "<=")) <= 0; }},
    {"gt", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, "gt")) > 0; }},
    {"greaterthan", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, "greaterthan")) > 0; }},
    {">", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, ">")) > 0; }},
    {"ge", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, "ge")) >= 0; }},
    {">=", [](Evaluator&, const Value& v, CallArgs& a) { return compare_values(v, one_arg(a, ">=")) >= 0; }},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const auto& [n, fn] : kTests)
    if (name == n) return fn;
  return nullptr;
}

}  // namespace hyllm::jinja
