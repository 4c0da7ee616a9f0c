#include "text/jinja/value_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "text/jinja/errors.h"
#include "text/jinja/utf8.h"

namespace hyllm::jinja {

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0.0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02" with the shortest round-trip digits
  std::string out;
  size_t p = 0;
  if (sci[0] == '-') {
    out += '-';
    p = 1;
  }
  size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = p; i < e_pos; ++i)
    if (sci[i] != '.') digits += sci[i];
  int exp = std::atoi(sci.c_str() + e_pos + 1);
  // Python's repr uses fixed notation for 1e-4 <= |f| < 1e16.
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (int_part.size() < static_cast<size_t>(exp + 1)) int_part += '0';
      std::string frac = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "";
      out += int_part;
      out += '.';
      out += frac.empty() ? "0" : frac;
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += 'e';
  out += exp < 0 ? '-' : '+';
  int a = std::abs(exp);
  if (a < 10) out += '0';
  out += std::to_string(a);
  return out;
}

namespace {

void append_string_repr(std::string& out, const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < s.size();) {
    char32_t cp = utf8::next(s, i);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x80 ? (cp < 0x20 || cp == 0x7F) : !utf8::is_printable(cp)) {
      int width = cp < 0x100 ? 2 : cp < 0x10000 ? 4 : 8;
      out += '\\';
      out += width == 2 ? 'x' : width == 4 ? 'u' : 'U';
      for (int k = width - 1; k >= 0; --k) out += kHex[(cp >> (4 * k)) & 0xF];
    } else {
      utf8::append(out, cp);
    }
  }
  out += quote;
}

void append_str(std::string& out, const Value& v, int depth);
void append_repr(std::string& out, const Value& v, int depth);

// A dict's or namespace's entries as Python prints them: k: v, comma-separated.
void append_entries(std::string& out, const Value& v, int depth) {
  bool first = true;
  for (const auto& [k, val] : v.dict_data().entries()) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k, depth + 1);
    out += ": ";
    append_repr(out, val, depth + 1);
  }
}

// Printing recurses into namespaces, which may even contain themselves.
constexpr int kMaxPrintDepth = 600;

void append_repr(std::string& out, const Value& v, int depth) {
  if (depth > kMaxPrintDepth) cap_fail("a value nests too deeply to print");
  switch (v.kind()) {
    case ValueKind::kUndefined: out += "Undefined"; return;
    case ValueKind::kString: append_string_repr(out, v.str()); return;
    case ValueKind::kList: {
      bool tuple = v.is_tuple();
      out += tuple ? '(' : '[';
      const auto& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        append_repr(out, items[i], depth + 1);
      }
      if (tuple && items.size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case ValueKind::kDict:
      out += '{';
      append_entries(out, v, depth);
      out += '}';
      return;
    default: append_str(out, v, depth); return;
  }
}

void append_str(std::string& out, const Value& v, int depth) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return;
    case ValueKind::kNone: out += "None"; return;
    case ValueKind::kBool: out += v.as_bool() ? "True" : "False"; return;
    case ValueKind::kInt: out += std::to_string(v.as_int()); return;
    case ValueKind::kFloat: out += format_float(v.as_float()); return;
    case ValueKind::kString: out += v.str(); return;
    case ValueKind::kList:
    case ValueKind::kDict: append_repr(out, v, depth); return;
    case ValueKind::kNamespace: {
      out += "<Namespace {";
      append_entries(out, v, depth);
      out += "}>";
      return;
    }
    case ValueKind::kCallable: out += "<function " + v.callable_data().name + ">"; return;
    case ValueKind::kObject: out += "<" + v.type_name() + ">"; return;
  }
}

}  // namespace

void append_python_str(std::string& out, const Value& v) { append_str(out, v, 0); }

std::string to_python_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_python_str(out, v);
  return out;
}

std::string to_python_repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

// ---- json.dumps ----

namespace {

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* kHex = "0123456789abcdef";
  auto hex4 = [&](unsigned u) {
    out += "\\u";
    for (int k = 3; k >= 0; --k) out += kHex[(u >> (4 * k)) & 0xF];
  };
  out += '"';
  for (size_t i = 0; i < s.size();) {
    char32_t cp = utf8::next(s, i);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        char32_t v = cp - 0x10000;
        hex4(0xD800 + (v >> 10));
        hex4(0xDC00 + (v & 0x3FF));
      } else {
        hex4(cp);
      }
    } else {
      utf8::append(out, cp);
    }
  }
  out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return format_float(f);
}

// JSON object keys as json.dumps coerces them.
std::string json_key(const Value& k) {
  switch (k.kind()) {
    case ValueKind::kString: return k.str();
    case ValueKind::kBool: return k.as_bool() ? "true" : "false";
    case ValueKind::kInt: return std::to_string(k.as_int());
    case ValueKind::kFloat: return json_float(k.as_float());
    case ValueKind::kNone: return "null";
    default: render_fail("keys must be str, int, float, bool or None, not {}", k.type_name());
  }
}

struct JsonWriter {
  const JsonOptions& opt;
  std::string& out;
  std::string item_sep;
  std::string key_sep;
  bool indented;
  std::string unit;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += unit;
  }

  void write(const Value& v, int level) {
    if (level > 512) render_fail("tojson: value nests too deeply");
    switch (v.kind()) {
      case ValueKind::kNone: out += "null"; return;
      case ValueKind::kBool: out += v.as_bool() ? "true" : "false"; return;
      case ValueKind::kInt: out += std::to_string(v.as_int()); return;
      case ValueKind::kFloat: out += json_float(v.as_float()); return;
      case ValueKind::kString: append_json_string(out, v.str(), opt.ensure_ascii); return;
      case ValueKind::kList: {
        const auto& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indented) newline(level + 1);
          write(items[i], level + 1);
        }
        if (indented) newline(level);
        out += ']';
        return;
      }
      case ValueKind::kDict: {
        const auto& entries = v.dict_data().entries();
        if (entries.empty()) {
          out += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> kv;
        kv.reserve(entries.size());
        for (const auto& [k, val] : entries) kv.emplace_back(json_key(k), &val);
        if (opt.sort_keys)
          std::stable_sort(kv.begin(), kv.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        out += '{';
        for (size_t i = 0; i < kv.size(); ++i) {
          if (i) out += item_sep;
          if (indented) newline(level + 1);
          append_json_string(out, kv[i].first, opt.ensure_ascii);
          out += key_sep;
          write(*kv[i].second, level + 1);
        }
        if (indented) newline(level);
        out += '}';
        return;
      }
      default:
        render_fail("Object of type {} is not JSON serializable", v.type_name());
    }
  }
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  JsonWriter w{options, out, {}, {}, false, {}};
  w.indented = options.use_indent_string || options.indent >= 0;
  if (options.use_indent_string) w.unit = options.indent_string;
  else if (options.indent > 0) w.unit.assign(static_cast<size_t>(options.indent), ' ');
  if (options.custom_separators) {
    w.item_sep = options.item_separator;
    w.key_sep = options.key_separator;
  } else {
    w.item_sep = w.indented ? "," : ", ";
    w.key_sep = ": ";
  }
  w.write(v, 0);
  return out;
}

}  // namespace hyllm::jinja
