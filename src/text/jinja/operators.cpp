// Python's arithmetic and container operators over Values, and the argument
// reader builtins share. Integers are 64-bit: where Python would grow a big
// integer the template fails instead of wrapping.

#include <cmath>
#include <limits>

#include "text/jinja/builtins.h"
#include "text/jinja/errors.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

[[noreturn]] void raise_undefined(const Value& v) {
  const std::string& hint = v.undefined_hint();
  render_fail("{}", hint.empty() ? std::string("value is undefined") : hint);
}

namespace {

int64_t as_integer(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }
bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }

void check_defined(const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
}

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  render_fail("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

[[noreturn]] void overflow() { render_fail("integer overflow: the result does not fit in 64 bits"); }

Value repeat(Evaluator& ev, const Value& seq, int64_t count) {
  if (count <= 0) return seq.is_string() ? Value::string("") : Value::list({}, seq.is_tuple());
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(count) > ev.limits().max_output_bytes / s.size())
      cap_fail("template built a string of more than {} bytes", ev.limits().max_output_bytes);
    ev.charge_bytes(s.size() * static_cast<size_t>(count));
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) out += s;
    return Value::string(std::move(out));
  }
  const auto& items = seq.items();
  if (!items.empty() && static_cast<uint64_t>(count) > static_cast<uint64_t>(ev.limits().max_loop_iterations) / items.size())
    cap_fail("template built a list of more than {} items", ev.limits().max_loop_iterations);
  ev.charge(static_cast<int64_t>(items.size()) * count);
  ValueList out;
  out.reserve(items.size() * static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.is_tuple());
}

}  // namespace

Value op_add(Evaluator& ev, const Value& a, const Value& b) {
  check_defined(a, b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return Value::number(a.to_double() + b.to_double());
    int64_t r;
    if (__builtin_add_overflow(as_integer(a), as_integer(b), &r)) overflow();
    return Value::integer(r);
  }
  if (a.is_string() && b.is_string()) {
    ev.charge_bytes(a.str().size() + b.str().size());
    return Value::string(a.str() + b.str());
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    ev.charge(static_cast<int64_t>(a.items().size() + b.items().size()));
    ValueList out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.is_tuple());
  }
  if (a.is_string() || a.is_list())
    render_fail("can only concatenate {} (not \"{}\") to {}", a.type_name(), b.type_name(), a.type_name());
  unsupported("+", a, b);
}

Value op_sub(const Value& a, const Value& b) {
  check_defined(a, b);
  if (!a.is_number() || !b.is_number()) unsupported("-", a, b);
  if (a.is_float() || b.is_float()) return Value::number(a.to_double() - b.to_double());
  int64_t r;
  if (__builtin_sub_overflow(as_integer(a), as_integer(b), &r)) overflow();
  return Value::integer(r);
}

Value op_mul(Evaluator& ev, const Value& a, const Value& b) {
  check_defined(a, b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return Value::number(a.to_double() * b.to_double());
    int64_t r;
    if (__builtin_mul_overflow(as_integer(a), as_integer(b), &r)) overflow();
    return Value::integer(r);
  }
  if ((a.is_string() || a.is_list()) && is_intlike(b)) return repeat(ev, a, as_integer(b));
  if ((b.is_string() || b.is_list()) && is_intlike(a)) return repeat(ev, b, as_integer(a));
  if (a.is_string() || a.is_list() || b.is_string() || b.is_list())
    render_fail("can't multiply sequence by non-int of type '{}'",
                (a.is_string() || a.is_list()) ? b.type_name() : a.type_name());
  unsupported("*", a, b);
}

Value op_div(const Value& a, const Value& b) {
  check_defined(a, b);
  if (!a.is_number() || !b.is_number()) unsupported("/", a, b);
  double d = b.to_double();
  if (d == 0.0) render_fail("division by zero");
  return Value::number(a.to_double() / d);
}

Value op_floordiv(const Value& a, const Value& b) {
  check_defined(a, b);
  if (!a.is_number() || !b.is_number()) unsupported("//", a, b);
  if (a.is_float() || b.is_float()) {
    double d = b.to_double();
    if (d == 0.0) render_fail("float floor division by zero");
    return Value::number(std::floor(a.to_double() / d));
  }
  int64_t x = as_integer(a), y = as_integer(b);
  if (y == 0) render_fail("integer division or modulo by zero");
  if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
  return Value::integer(q);
}

Value op_mod(Evaluator& ev, const Value& a, const Value& b) {
  check_defined(a, b);
  if (a.is_string()) {
    std::string s = percent_format(a.str(), b);
    ev.charge_bytes(s.size());
    return Value::string(std::move(s));
  }
  if (!a.is_number() || !b.is_number()) unsupported("%", a, b);
  if (a.is_float() || b.is_float()) {
    double x = a.to_double(), y = b.to_double();
    if (y == 0.0) render_fail("float modulo");
    double r = std::fmod(x, y);
    if (r != 0.0 && ((r < 0) != (y < 0))) r += y;
    return Value::number(r);
  }
  int64_t x = as_integer(a), y = as_integer(b);
  if (y == 0) render_fail("integer division or modulo by zero");
  if (y == -1) return Value::integer(0);
  int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return Value::integer(r);
}

Value op_pow(const Value& a, const Value& b) {
  check_defined(a, b);
  if (!a.is_number() || !b.is_number()) unsupported("** or pow()", a, b);
  if (is_intlike(a) && is_intlike(b) && as_integer(b) >= 0) {
    int64_t base = as_integer(a), exp = as_integer(b), result = 1;
    while (exp > 0) {
      if (exp & 1) {
        if (__builtin_mul_overflow(result, base, &result)) overflow();
      }
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
    }
    return Value::integer(result);
  }
  double x = a.to_double(), y = b.to_double();
  if (x == 0.0 && y < 0) render_fail("0.0 cannot be raised to a negative power");
  return Value::number(std::pow(x, y));
}

Value op_neg(const Value& a) {
  if (a.is_undefined()) raise_undefined(a);
  if (a.is_float()) return Value::number(-a.as_float());
  if (is_intlike(a)) {
    int64_t v = as_integer(a);
    if (v == std::numeric_limits<int64_t>::min()) overflow();
    return Value::integer(-v);
  }
  render_fail("bad operand type for unary -: '{}'", a.type_name());
}

// ---- containers ----

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return {};
    case ValueKind::kList: return v.items();
    case ValueKind::kDict: {
      ValueList keys;
      keys.reserve(v.dict_data().size());
      for (const auto& [k, val] : v.dict_data().entries()) keys.push_back(k);
      return keys;
    }
    case ValueKind::kString: {
      ValueList chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        size_t start = i;
        utf8::next(s, i);
        chars.push_back(Value::string(s.substr(start, i - start)));
      }
      return chars;
    }
    default: render_fail("'{}' object is not iterable", v.type_name());
  }
}

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return 0;
    case ValueKind::kString: return static_cast<int64_t>(utf8::length(v.str()));
    case ValueKind::kList: return static_cast<int64_t>(v.items().size());
    case ValueKind::kDict: return static_cast<int64_t>(v.dict_data().size());
    default: render_fail("object of type '{}' has no len()", v.type_name());
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kUndefined: return false;
    case ValueKind::kString:
      if (!item.is_string())
        render_fail("'in <string>' requires string as left operand, not {}", item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case ValueKind::kList:
      for (const auto& x : container.items())
        if (values_equal(x, item)) return true;
      return false;
    case ValueKind::kDict: return container.dict_data().find(item) != nullptr;
    default: render_fail("argument of type '{}' is not iterable", container.type_name());
  }
}

// ---- argument reading ----

ArgReader::ArgReader(std::string_view function, CallArgs& args, std::initializer_list<const char*> names)
    : function_(function), values_(names.size()), present_(names.size(), false) {
  if (args.positional.size() > names.size())
    render_fail("{}() takes at most {} arguments ({} given)", function_, names.size(), args.positional.size());
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = std::move(args.positional[i]);
    present_[i] = true;
  }
  for (auto& [key, val] : args.keyword) {
    size_t i = 0;
    for (const char* n : names) {
      if (key == n) break;
      ++i;
    }
    if (i == names.size()) render_fail("{}() got an unexpected keyword argument '{}'", function_, key);
    if (present_[i]) render_fail("{}() got multiple values for argument '{}'", function_, key);
    values_[i] = std::move(val);
    present_[i] = true;
  }
}

int64_t ArgReader::get_int(size_t i, int64_t fallback) const {
  if (!present_[i]) return fallback;
  const Value& v = values_[i];
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_float() && std::isfinite(v.as_float())) return static_cast<int64_t>(v.as_float());
  render_fail("{}(): expected an integer argument, got '{}'", function_, v.type_name());
}

bool ArgReader::get_bool(size_t i, bool fallback) const {
  return present_[i] ? values_[i].truthy() : fallback;
}

std::string ArgReader::get_string(size_t i, const std::string& fallback) const {
  if (!present_[i]) return fallback;
  return to_python_str(values_[i]);
}

}  // namespace hyllm::jinja
