// Python's printf-style "fmt % args" (also the `format` filter): flags
// "-+ 0#", width, precision and the conversions s r a d i u f F e E g G x X o c %.

#include <cmath>

#include "text/jinja/builtins.h"
#include "text/jinja/errors.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

namespace {

struct Spec {
  bool left = false, plus = false, space = false, zero = false, alt = false;
  int width = -1, precision = -1;
  char conv = 's';
};

std::string pad(std::string body, const Spec& spec, bool numeric) {
  size_t len = utf8::length(body);
  if (spec.width < 0 || len >= static_cast<size_t>(spec.width)) return body;
  size_t fill = static_cast<size_t>(spec.width) - len;
  if (spec.left) return body + std::string(fill, ' ');
  if (spec.zero && numeric) {
    size_t sign = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    if (body.size() > sign + 1 && body[sign] == '0' && (body[sign + 1] == 'x' || body[sign + 1] == 'X' || body[sign + 1] == 'o'))
      sign += 2;
    return body.substr(0, sign) + std::string(fill, '0') + body.substr(sign);
  }
  return std::string(fill, ' ') + body;
}

std::string sign_prefix(bool negative, const Spec& spec) {
  if (negative) return "-";
  if (spec.plus) return "+";
  if (spec.space) return " ";
  return "";
}

std::string format_one(const Spec& spec, const Value& v) {
  switch (spec.conv) {
    case 's': {
      std::string s = to_python_str(v);
      if (v.is_undefined()) s.clear();
      if (spec.precision >= 0) {
        std::u32string cps = utf8::decode(s);
        if (cps.size() > static_cast<size_t>(spec.precision)) s = utf8::encode(cps.substr(0, spec.precision));
      }
      return pad(s, spec, false);
    }
    case 'r':
    case 'a': return pad(to_python_repr(v), spec, false);
    case 'c': {
      if (v.is_string()) return pad(v.str(), spec, false);
      std::string s;
      utf8::append(s, static_cast<char32_t>(v.is_int() ? v.as_int() : 0xFFFD));
      return pad(s, spec, false);
    }
    default: break;
  }
  if (!v.is_number()) render_fail("%{} format: a real number is required, not {}", spec.conv, v.type_name());
  char conv = spec.conv;
  if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o') {
    double d = v.to_double();
    if (!std::isfinite(d)) render_fail("cannot convert float {} to integer", format_float(d));
    int64_t n = v.is_float() ? static_cast<int64_t>(std::trunc(d)) : (v.is_bool() ? v.as_bool() : v.as_int());
    uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
    std::string digits;
    if (conv == 'x') digits = fmt::format("{:x}", mag);
    else if (conv == 'X') digits = fmt::format("{:X}", mag);
    else if (conv == 'o') digits = fmt::format("{:o}", mag);
    else digits = std::to_string(mag);
    if (spec.precision > 0 && digits.size() < static_cast<size_t>(spec.precision))
      digits = std::string(spec.precision - digits.size(), '0') + digits;
    std::string prefix;
    if (spec.alt) prefix = conv == 'x' ? "0x" : conv == 'X' ? "0X" : conv == 'o' ? "0o" : "";
    return pad(sign_prefix(n < 0, spec) + prefix + digits, spec, true);
  }
  double d = v.to_double();
  int precision = spec.precision < 0 ? 6 : spec.precision;
  std::string body;
  double mag = std::fabs(d);
  bool neg = std::signbit(d) && !std::isnan(d);
  if (!std::isfinite(d)) {
    body = std::isnan(d) ? "nan" : "inf";
    if (conv == 'F' || conv == 'E' || conv == 'G') for (auto& ch : body) ch = static_cast<char>(std::toupper(ch));
  } else if (conv == 'f' || conv == 'F') {
    body = fmt::format("{:.{}f}", mag, precision);
  } else if (conv == 'e' || conv == 'E') {
    body = conv == 'e' ? fmt::format("{:.{}e}", mag, precision) : fmt::format("{:.{}E}", mag, precision);
  } else if (conv == 'g' || conv == 'G') {
    // C's %g matches Python's %g (both drop trailing zeros unless '#').
    char buf[512];
    char pattern[8] = {'%', spec.alt ? '#' : '.', '.', '*', conv, 0};
    if (!spec.alt) {
      pattern[1] = '.';
      pattern[2] = '*';
      pattern[3] = conv;
      pattern[4] = 0;
    }
    std::snprintf(buf, sizeof buf, pattern, precision == 0 ? 1 : std::min(precision, 300), mag);
    body = buf;
  } else {
    render_fail("unsupported format character '{}'", conv);
  }
  return pad(sign_prefix(neg, spec) + body, spec, true);
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args) {
  ValueList positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) positional = args.items();
  else if (args.is_dict()) mapping = &args.dict_data();
  else positional.push_back(args);
  size_t next_arg = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c != '%') {
      out += c;
      continue;
    }
    if (++i >= fmt.size()) render_fail("incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    Spec spec;
    const Value* value = nullptr;
    Value keyed;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) render_fail("incomplete format key");
      if (!mapping) render_fail("format requires a mapping");
      const Value* found = mapping->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!found) render_fail("KeyError: '{}'", fmt.substr(i + 1, close - i - 1));
      keyed = *found;
      value = &keyed;
      used_mapping = true;
      i = close + 1;
    }
    for (; i < fmt.size(); ++i) {
      char f = fmt[i];
      if (f == '-') spec.left = true;
      else if (f == '+') spec.plus = true;
      else if (f == ' ') spec.space = true;
      else if (f == '0') spec.zero = true;
      else if (f == '#') spec.alt = true;
      else break;
    }
    auto read_number = [&](int& target) {
      if (i < fmt.size() && fmt[i] == '*') {
        if (next_arg >= positional.size()) render_fail("not enough arguments for format string");
        const Value& w = positional[next_arg++];
        if (!w.is_int()) render_fail("* wants int");
        target = static_cast<int>(std::min<int64_t>(w.as_int(), 1 << 20));
        ++i;
        return;
      }
      int n = -1;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
        n = (n < 0 ? 0 : n) * 10 + (fmt[i] - '0');
        if (n > (1 << 20)) render_fail("width or precision too big");
        ++i;
      }
      if (n >= 0) target = n;
    };
    read_number(spec.width);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = 0;
      read_number(spec.precision);
    }
    while (i < fmt.size() && (fmt[i] == 'l' || fmt[i] == 'h' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) render_fail("incomplete format");
    spec.conv = fmt[i];
    if (std::string_view("sracdiuxXofFeEgG").find(spec.conv) == std::string_view::npos)
      render_fail("unsupported format character '{}' (0x{:x}) at index {}", spec.conv,
                  static_cast<unsigned char>(spec.conv), i);
    if (!value) {
      if (next_arg >= positional.size()) render_fail("not enough arguments for format string");
      value = &positional[next_arg++];
    }
    out += format_one(spec, *value);
  }
  if (!mapping && next_arg < positional.size())
    render_fail("not all arguments converted during string formatting");
  (void)used_mapping;
  return out;
}

}  // namespace hyllm::jinja
