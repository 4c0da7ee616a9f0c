// jinja2's builtin filters on strings and numbers, transformers' tojson, and
// the registry of all filters (sequence filters live in
// filters_collections.cpp).

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "text/jinja/builtins.h"
#include "text/jinja/errors.h"
#include "text/jinja/string_methods.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

FilterFn find_collection_filter(std::string_view name);

namespace {

std::string text_of(const Value& v) { return to_python_str(v); }

Value string_result(Evaluator& ev, std::string s) {
  ev.charge_bytes(s.size());
  return Value::string(std::move(s));
}

Value f_length(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("length", a, {});
  return Value::integer(length_of(v));
}

Value f_string(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("string", a, {});
  return Value::string(text_of(v));
}

Value f_upper(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("upper", a, {});
  return Value::string(utf8::upper(text_of(v)));
}

Value f_lower(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("lower", a, {});
  return Value::string(utf8::lower(text_of(v)));
}

Value f_title(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("title", a, {});
  return Value::string(jinja_title(text_of(v)));
}

Value f_capitalize(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("capitalize", a, {});
  return Value::string(capitalize(text_of(v)));
}

Value f_trim(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("trim", a, {"chars"});
  bool has = r.has(0) && !r.get(0).is_none();
  return Value::string(strip_chars(text_of(v), has, has ? text_of(r.get(0)) : "", true, true));
}

Value f_replace(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("replace", a, {"old", "new", "count"});
  int64_t count = r.has(2) && !r.get(2).is_none() ? r.get_int(2, -1) : -1;
  return string_result(ev, replace_all(text_of(v), text_of(r.get(0)), text_of(r.get(1)), count));
}

Value f_default(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (r.get_bool(1, false) && !v.truthy())) return r.get_or(0, Value::string(""));
  return v;
}

Value f_tojson(Evaluator& ev, const Value& v, CallArgs& a) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  ArgReader r("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions opt;
  opt.ensure_ascii = r.get_bool(0, false);
  if (r.has(1) && !r.get(1).is_none()) {
    const Value& ind = r.get(1);
    if (ind.is_string()) {
      opt.use_indent_string = true;
      opt.indent_string = ind.str();
    } else {
      opt.indent = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(r.get_int(1, 0), 1024)));
    }
  }
  if (r.has(2) && !r.get(2).is_none()) {
    ValueList seps = iterate(r.get(2));
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string())
      render_fail("tojson: separators must be a pair of strings");
    opt.custom_separators = true;
    opt.item_separator = seps[0].str();
    opt.key_separator = seps[1].str();
  }
  opt.sort_keys = r.get_bool(3, false);
  return string_result(ev, to_json(v, opt));
}

// Python int(str, base): surrounding whitespace and single underscores between digits allowed.
bool parse_python_int(std::string s, int base, int64_t& out) {
  s = strip_chars(s, false, "", true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || s[i - 1] == '_' || !std::isalnum(static_cast<unsigned char>(s[i + 1])))
        return false;
      continue;
    }
    digits += s[i];
  }
  if (digits.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end || errno || digits[0] == ' ' || (digits.size() > 1 && digits[1] == ' ')) return false;
  out = v;
  return true;
}

bool parse_python_float(const std::string& text, double& out) {
  std::string s = strip_chars(text, false, "", true, true);
  std::string clean;
  for (char c : s)
    if (c != '_') clean += c;
  if (clean.empty()) return false;
  std::string low = utf8::lower(clean);
  std::string body = (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
  if (body == "inf" || body == "infinity" || body == "nan") {
    out = body == "nan" ? NAN : (low[0] == '-' ? -INFINITY : INFINITY);
    return true;
  }
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return *end == 0;
}

Value f_int(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("int", a, {"default", "base"});
  Value fallback = r.get_or(0, Value::integer(0));
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::integer(v.as_bool() ? 1 : 0);
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) return fallback;
    return Value::integer(static_cast<int64_t>(std::trunc(v.as_float())));
  }
  if (v.is_string()) {
    int64_t n;
    if (parse_python_int(v.str(), static_cast<int>(r.get_int(1, 10)), n)) return Value::integer(n);
    double d;
    if (parse_python_float(v.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value::integer(static_cast<int64_t>(std::trunc(d)));
  }
  return fallback;
}

Value f_float(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("float", a, {"default"});
  Value fallback = r.get_or(0, Value::number(0.0));
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_number()) return Value::number(v.to_double());
  double d;
  if (v.is_string() && parse_python_float(v.str(), d)) return Value::number(d);
  return fallback;
}

Value f_abs(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("abs", a, {});
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    int64_t n = v.is_bool() ? v.as_bool() : v.as_int();
    if (n == INT64_MIN) render_fail("integer overflow: the result does not fit in 64 bits");
    return Value::integer(n < 0 ? -n : n);
  }
  if (v.is_undefined()) raise_undefined(v);
  render_fail("bad operand type for abs(): '{}'", v.type_name());
}

// Python's round(x, ndigits): correctly rounded, ties to even.
double python_round(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0) {
    if (digits > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-digits));
  if (!std::isfinite(scale)) return 0.0 * x;
  return std::nearbyint(x / scale) * scale;
}

Value f_round(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("round", a, {"precision", "method"});
  int64_t precision = r.get_int(0, 0);
  std::string method = r.get_string(1, "common");
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_number()) render_fail("type {} doesn't define __round__ method", v.type_name());
  double x = v.to_double();
  if (method == "common") {
    if (!v.is_float()) return Value::integer(v.is_bool() ? v.as_bool() : v.as_int());
    return Value::number(python_round(x, precision));
  }
  if (method != "ceil" && method != "floor") render_fail("method must be common, ceil or floor");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double y = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
  return Value::number(y / scale);
}

Value f_safe(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("safe", a, {});
  return v.is_string() ? v : Value::string(text_of(v));
}

Value f_escape(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("escape", a, {});
  std::string out;
  for (char c : text_of(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return string_result(ev, std::move(out));
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::u32string cps = utf8::decode(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
               c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    lines.push_back(utf8::encode(std::u32string_view(cps).substr(start, i - start)));
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < cps.size()) lines.push_back(utf8::encode(std::u32string_view(cps).substr(start)));
  return lines;
}

Value f_indent(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("indent", a, {"width", "first", "blank"});
  std::string pad;
  if (r.has(0) && r.get(0).is_string()) pad = r.get(0).str();
  else pad.assign(static_cast<size_t>(std::clamp<int64_t>(r.get_int(0, 4), 0, 4096)), ' ');
  bool first = r.get_bool(1, false), blank = r.get_bool(2, false);
  std::vector<std::string> lines = split_lines(text_of(v) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += pad;
    }
    out += lines[i];
    ev.charge_bytes(out.size());
  }
  if (first) out = pad + out;
  return string_result(ev, std::move(out));
}

Value f_center(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("center", a, {"width"});
  CallArgs inner;
  inner.positional.push_back(Value::integer(r.get_int(0, 80)));
  return ev.call(get_attribute(Value::string(text_of(v)), "center"), inner);
}

Value f_wordcount(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("wordcount", a, {});
  std::string s = text_of(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c = utf8::next(s, i);
    bool w = c == '_' || utf8::is_alnum(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_format(Evaluator& ev, const Value& v, CallArgs& a) {
  if (!a.positional.empty() && !a.keyword.empty())
    render_fail("can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.keyword.empty()) {
    Dict d;
    for (auto& [k, val] : a.keyword) d.set(Value::string(k), val);
    args = Value::dict(std::move(d));
  } else {
    args = Value::list(a.positional, true);
  }
  return string_result(ev, percent_format(text_of(v), args));
}

Value f_attr(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("attr", a, {"name"});
  if (v.is_undefined()) raise_undefined(v);
  std::string name = text_of(r.get(0));
  // jinja2's attr() is getattr() only: dict entries are not attributes.
  if (v.is_dict()) {
    Value probe = get_attribute(Value::dict(Dict()), name);  // methods only, no entries
    return probe.is_callable() ? get_attribute(v, name) : probe;
  }
  return get_attribute(v, name);
}

const std::pair<const char*, FilterFn> kFilters[] = {
    {"length", f_length},   {"count", f_length},       {"string", f_string}, {"upper", f_upper},
    {"lower", f_lower},     {"title", f_title},        {"capitalize", f_capitalize},
    {"trim", f_trim},       {"replace", f_replace},    {"default", f_default}, {"d", f_default},
    {"tojson", f_tojson},   {"int", f_int},            {"float", f_float},   {"abs", f_abs},
    {"round", f_round},     {"safe", f_safe},          {"escape", f_escape}, {"e", f_escape},
    {"forceescape", f_escape}, {"indent", f_indent},   {"center", f_center}, {"wordcount", f_wordcount},
    {"format", f_format},   {"attr", f_attr},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& [n, fn] : kFilters)
    if (name == n) return fn;
  return find_collection_filter(name);
}

}  // namespace hyllm::jinja
