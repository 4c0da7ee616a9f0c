#include "text/jinja/string_methods.h"

#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/errors.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

std::string strip_chars(std::string_view s, bool has_chars, std::string_view chars, bool left, bool right) {
  // Decodes only the ends it strips: templates trim long message contents.
  std::u32string set = utf8::decode(chars);
  auto strip_it = [&](char32_t c) { return has_chars ? set.find(c) != std::u32string::npos : utf8::is_space(c); };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t next = b;
      if (!strip_it(utf8::next(s, next))) break;
      b = next;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t end = start;
      char32_t c = utf8::next(s, end);
      if (end != e) {  // malformed tail: its last byte stands alone
        start = e - 1;
        c = 0xFFFD;
      }
      if (!strip_it(c)) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::string replace_all(std::string_view s, std::string_view old_sub, std::string_view new_sub, int64_t count) {
  std::string out;
  if (old_sub.empty()) {
    // Python inserts `new` between every character and at both ends.
    int64_t done = 0;
    size_t i = 0;
    while (i <= s.size()) {
      if (count >= 0 && done >= count) {
        out.append(s.substr(i));
        break;
      }
      out.append(new_sub);
      ++done;
      if (i == s.size()) break;
      size_t start = i;
      utf8::next(s, i);
      out.append(s.substr(start, i - start));
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old_sub, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(new_sub);
    pos = f + old_sub.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string capitalize(std::string_view s) {
  std::u32string cps = utf8::decode(s);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? utf8::to_upper(cps[i]) : utf8::to_lower(cps[i]);
  return utf8::encode(cps);
}

std::string jinja_title(std::string_view s) {
  // Words begin after runs of [-\s({[<]; each item is capitalised.
  std::u32string cps = utf8::decode(s);
  auto is_delim = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || utf8::is_space(c); };
  bool at_start = true;
  for (auto& c : cps) {
    if (is_delim(c)) {
      at_start = true;
      continue;
    }
    c = at_start ? utf8::to_upper(c) : utf8::to_lower(c);
    at_start = false;
  }
  return utf8::encode(cps);
}

std::string python_title(std::string_view s) {
  std::u32string cps = utf8::decode(s);
  bool prev_cased = false;
  for (auto& c : cps) {
    bool cased = utf8::is_upper(c) || utf8::is_lower(c);
    if (cased) c = prev_cased ? utf8::to_lower(c) : utf8::to_upper(c);
    prev_cased = cased;
  }
  return utf8::encode(cps);
}

namespace {

using Method = Value (*)(Evaluator&, const std::string& self, CallArgs& args);

std::string arg_str(const Value& v, const char* fn) {
  if (!v.is_string()) render_fail("{}() argument must be str, not {}", fn, v.type_name());
  return v.str();
}

// Optional [start, end) in code points, as byte offsets into s.
std::pair<size_t, size_t> byte_range(const std::string& s, const ArgReader& r, size_t start_i, size_t end_i) {
  if (!r.has(start_i) && !r.has(end_i)) return {0, s.size()};
  std::u32string cps = utf8::decode(s);
  auto n = static_cast<int64_t>(cps.size());
  auto norm = [&](int64_t i) { return i < 0 ? std::max<int64_t>(0, i + n) : std::min(i, n); };
  int64_t b = r.has(start_i) && !r.get(start_i).is_none() ? norm(r.get_int(start_i, 0)) : 0;
  int64_t e = r.has(end_i) && !r.get(end_i).is_none() ? norm(r.get_int(end_i, n)) : n;
  if (e < b) e = b;
  size_t bb = utf8::encode(cps.substr(0, b)).size();
  size_t eb = bb + utf8::encode(cps.substr(b, e - b)).size();
  return {bb, eb};
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(utf8::length(std::string_view(s).substr(0, byte_pos)));
}

Value affix_test(const std::string& s, CallArgs& args, bool prefix) {
  ArgReader r(prefix ? "startswith" : "endswith", args, {"affix", "start", "end"});
  auto [b, e] = byte_range(s, r, 1, 2);
  std::string_view view = std::string_view(s).substr(b, e - b);
  auto test = [&](const Value& a) {
    const std::string& x = arg_str(a, prefix ? "startswith" : "endswith");
    if (x.size() > view.size()) return false;
    return prefix ? view.substr(0, x.size()) == x : view.substr(view.size() - x.size()) == x;
  };
  const Value& a = r.get(0);
  if (a.is_tuple()) {
    for (const auto& item : a.items())
      if (test(item)) return Value::boolean(true);
    return Value::boolean(false);
  }
  return Value::boolean(test(a));
}

Value do_split(Evaluator& ev, const std::string& s, CallArgs& args, bool from_right) {
  ArgReader r(from_right ? "rsplit" : "split", args, {"sep", "maxsplit"});
  int64_t maxsplit = r.get_int(1, -1);
  ValueList parts;
  if (!r.has(0) || r.get(0).is_none()) {
    std::u32string cps = utf8::decode(s);
    std::vector<std::u32string> words;
    if (!from_right) {
      size_t i = 0;
      while (i < cps.size()) {
        while (i < cps.size() && utf8::is_space(cps[i])) ++i;
        if (i >= cps.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) >= maxsplit) {
          size_t e = cps.size();
          while (e > i && utf8::is_space(cps[e - 1])) --e;
          words.push_back(cps.substr(i, e - i));
          break;
        }
        size_t j = i;
        while (j < cps.size() && !utf8::is_space(cps[j])) ++j;
        words.push_back(cps.substr(i, j - i));
        i = j;
      }
    } else {
      size_t e = cps.size();
      while (e > 0) {
        while (e > 0 && utf8::is_space(cps[e - 1])) --e;
        if (e == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) >= maxsplit) {
          size_t b = 0;
          while (b < e && utf8::is_space(cps[b])) ++b;
          words.push_back(cps.substr(b, e - b));
          break;
        }
        size_t b = e;
        while (b > 0 && !utf8::is_space(cps[b - 1])) --b;
        words.push_back(cps.substr(b, e - b));
        e = b;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto& w : words) parts.push_back(Value::string(utf8::encode(w)));
  } else {
    std::string sep = arg_str(r.get(0), "split");
    if (sep.empty()) render_fail("empty separator");
    std::vector<std::string> pieces;
    if (!from_right) {
      size_t pos = 0;
      while (true) {
        size_t f = s.find(sep, pos);
        if (f == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) >= maxsplit)) break;
        pieces.push_back(s.substr(pos, f - pos));
        pos = f + sep.size();
      }
      pieces.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      while (true) {
        if (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) >= maxsplit) break;
        if (end < sep.size()) break;
        size_t f = s.rfind(sep, end - sep.size());
        if (f == std::string::npos) break;
        pieces.push_back(s.substr(f + sep.size(), end - f - sep.size()));
        end = f;
      }
      pieces.push_back(s.substr(0, end));
      std::reverse(pieces.begin(), pieces.end());
    }
    for (auto& p : pieces) parts.push_back(Value::string(std::move(p)));
  }
  ev.charge(static_cast<int64_t>(parts.size()));
  return Value::list(std::move(parts));
}

Value do_find(const std::string& s, CallArgs& args, const char* name, bool reverse, bool raise) {
  ArgReader r(name, args, {"sub", "start", "end"});
  std::string sub = arg_str(r.get(0), name);
  auto [b, e] = byte_range(s, r, 1, 2);
  std::string_view view = std::string_view(s).substr(b, e - b);
  size_t f = reverse ? view.rfind(sub) : view.find(sub);
  if (f == std::string_view::npos) {
    if (raise) render_fail("substring not found");
    return Value::integer(-1);
  }
  return Value::integer(cp_index(s, b + f));
}

template <bool (*Pred)(char32_t)>
Value all_chars(const std::string& s) {
  if (s.empty()) return Value::boolean(false);
  for (size_t i = 0; i < s.size();)
    if (!Pred(utf8::next(s, i))) return Value::boolean(false);
  return Value::boolean(true);
}

Value cased_test(const std::string& s, bool want_upper) {
  bool any_cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c = utf8::next(s, i);
    if (utf8::is_upper(c)) {
      if (!want_upper) return Value::boolean(false);
      any_cased = true;
    } else if (utf8::is_lower(c)) {
      if (want_upper) return Value::boolean(false);
      any_cased = true;
    }
  }
  return Value::boolean(any_cased);
}

Value justify(Evaluator& ev, const std::string& s, CallArgs& args, const char* name, int mode) {
  ArgReader r(name, args, {"width", "fillchar"});
  int64_t width = r.get_int(0, 0);
  std::string fill = r.has(1) ? arg_str(r.get(1), name) : " ";
  if (utf8::length(fill) != 1) render_fail("The fill character must be exactly one character long");
  int64_t len = static_cast<int64_t>(utf8::length(s));
  if (width <= len) return Value::string(s);
  ev.charge_bytes(static_cast<size_t>(width - len) * fill.size() + s.size());
  int64_t total = width - len;
  int64_t left = mode < 0 ? 0 : mode > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value::string(std::move(out));
}

Value format_method(Evaluator& ev, const std::string& s, CallArgs& args) {
  // str.format with plain fields: {}, {0}, {name}, {{ and }}. Format specs
  // and conversions are refused rather than approximated.
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '{' && i + 1 < s.size() && s[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < s.size() && s[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t close = s.find('}', i);
      if (close == std::string::npos) render_fail("Single '{{' encountered in format string");
      std::string field = s.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!") != std::string::npos)
        render_fail("str.format: format specs and conversions are not supported");
      const Value* v = nullptr;
      if (field.empty()) {
        if (auto_index >= args.positional.size()) render_fail("Replacement index {} out of range", auto_index);
        v = &args.positional[auto_index++];
      } else if (std::all_of(field.begin(), field.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
        size_t k = std::stoul(field);
        if (k >= args.positional.size()) render_fail("Replacement index {} out of range", k);
        v = &args.positional[k];
      } else {
        for (const auto& [key, val] : args.keyword)
          if (key == field) v = &val;
        if (!v) render_fail("KeyError: '{}'", field);
      }
      append_python_str(out, *v);
      i = close;
    } else if (c == '}') {
      render_fail("Single '}}' encountered in format string");
    } else {
      out += c;
    }
  }
  ev.charge_bytes(out.size());
  return Value::string(std::move(out));
}

Method find_method(const std::string& name) {
  static const std::vector<std::pair<const char*, Method>> kMethods = {
      {"upper", [](Evaluator&, const std::string& s, CallArgs& a) { ArgReader r("upper", a, {}); return Value::string(utf8::upper(s)); }},
      {"lower", [](Evaluator&, const std::string& s, CallArgs& a) { ArgReader r("lower", a, {}); return Value::string(utf8::lower(s)); }},
      {"title", [](Evaluator&, const std::string& s, CallArgs& a) { ArgReader r("title", a, {}); return Value::string(python_title(s)); }},
      {"capitalize", [](Evaluator&, const std::string& s, CallArgs& a) { ArgReader r("capitalize", a, {}); return Value::string(capitalize(s)); }},
      {"strip", [](Evaluator&, const std::string& s, CallArgs& a) {
         ArgReader r("strip", a, {"chars"});
         bool has = r.has(0) && !r.get(0).is_none();
         return Value::string(strip_chars(s, has, has ? arg_str(r.get(0), "strip") : "", true, true)); }},
      {"lstrip", [](Evaluator&, const std::string& s, CallArgs& a) {
         ArgReader r("lstrip", a, {"chars"});
         bool has = r.has(0) && !r.get(0).is_none();
         return Value::string(strip_chars(s, has, has ? arg_str(r.get(0), "lstrip") : "", true, false)); }},
      {"rstrip", [](Evaluator&, const std::string& s, CallArgs& a) {
         ArgReader r("rstrip", a, {"chars"});
         bool has = r.has(0) && !r.get(0).is_none();
         return Value::string(strip_chars(s, has, has ? arg_str(r.get(0), "rstrip") : "", false, true)); }},
      {"split", [](Evaluator& ev, const std::string& s, CallArgs& a) { return do_split(ev, s, a, false); }},
      {"rsplit", [](Evaluator& ev, const std::string& s, CallArgs& a) { return do_split(ev, s, a, true); }},
      {"splitlines", [](Evaluator& ev, const std::string& s, CallArgs& a) {
         ArgReader r("splitlines", a, {"keepends"});
         bool keep = r.get_bool(0, false);
         ValueList lines;
         std::u32string cps = utf8::decode(s);
         size_t start = 0;
         for (size_t i = 0; i < cps.size(); ++i) {
           char32_t c = cps[i];
           bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
                      c == 0x85 || c == 0x2028 || c == 0x2029;
           if (!brk) continue;
           size_t end = i;
           if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
           lines.push_back(Value::string(utf8::encode(cps.substr(start, (keep ? i + 1 : end) - start))));
           start = i + 1;
         }
         if (start < cps.size()) lines.push_back(Value::string(utf8::encode(cps.substr(start))));
         ev.charge(static_cast<int64_t>(lines.size()));
         return Value::list(std::move(lines)); }},
      {"startswith", [](Evaluator&, const std::string& s, CallArgs& a) { return affix_test(s, a, true); }},
      {"endswith", [](Evaluator&, const std::string& s, CallArgs& a) { return affix_test(s, a, false); }},
      {"replace", [](Evaluator& ev, const std::string& s, CallArgs& a) {
         ArgReader r("replace", a, {"old", "new", "count"});
         std::string out = replace_all(s, arg_str(r.get(0), "replace"), arg_str(r.get(1), "replace"), r.get_int(2, -1));
         ev.charge_bytes(out.size());
         return Value::string(std::move(out)); }},
      {"find", [](Evaluator&, const std::string& s, CallArgs& a) { return do_find(s, a, "find", false, false); }},
      {"rfind", [](Evaluator&, const std::string& s, CallArgs& a) { return do_find(s, a, "rfind", true, false); }},
      {"index", [](Evaluator&, const std::string& s, CallArgs& a) { return do_find(s, a, "index", false, true); }},
      {"rindex", [](Evaluator&, const std::string& s, CallArgs& a) { return do_find(s, a, "rindex", true, true); }},
      {"count", [](Evaluator&, const std::string& s, CallArgs& a) {
         ArgReader r("count", a, {"sub", "start", "end"});
         std::string sub = arg_str(r.get(0), "count");
         auto [b, e] = byte_range(s, r, 1, 2);
         std::string_view view = std::string_view(s).substr(b, e - b);
         if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8::length(view)) + 1);
         int64_t n = 0;
         for (size_t p = view.find(sub); p != std::string_view::npos; p = view.find(sub, p + sub.size())) ++n;
         return Value::integer(n); }},
      {"join", [](Evaluator& ev, const std::string& s, CallArgs& a) {
         ArgReader r("join", a, {"iterable"});
         std::string out;
         bool first = true;
         for (const auto& item : iterate(r.get(0))) {
           if (!item.is_string()) render_fail("sequence item: expected str instance, {} found", item.type_name());
           if (!first) out += s;
           first = false;
           out += item.str();
           ev.charge_bytes(out.size());
         }
         return Value::string(std::move(out)); }},
      {"removeprefix", [](Evaluator&, const std::string& s, CallArgs& a) {
         ArgReader r("removeprefix", a, {"prefix"});
         std::string p = arg_str(r.get(0), "removeprefix");
         return Value::string(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s); }},
      {"removesuffix", [](Evaluator&, const std::string& s, CallArgs& a) {
         ArgReader r("removesuffix", a, {"suffix"});
         std::string p = arg_str(r.get(0), "removesuffix");
         bool has = !p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
         return Value::string(has ? s.substr(0, s.size() - p.size()) : s); }},
      {"isdigit", [](Evaluator&, const std::string& s, CallArgs&) { return all_chars<utf8::is_digit>(s); }},
      {"isnumeric", [](Evaluator&, const std::string& s, CallArgs&) { return all_chars<utf8::is_digit>(s); }},
      {"isdecimal", [](Evaluator&, const std::string& s, CallArgs&) { return all_chars<utf8::is_digit>(s); }},
      {"isalpha", [](Evaluator&, const std::string& s, CallArgs&) { return all_chars<utf8::is_alpha>(s); }},
      {"isalnum", [](Evaluator&, const std::string& s, CallArgs&) { return all_chars<utf8::is_alnum>(s); }},
      {"isspace", [](Evaluator&, const std::string& s, CallArgs&) { return all_chars<utf8::is_space>(s); }},
      {"isupper", [](Evaluator&, const std::string& s, CallArgs&) { return cased_test(s, true); }},
      {"islower", [](Evaluator&, const std::string& s, CallArgs&) { return cased_test(s, false); }},
      {"ljust", [](Evaluator& ev, const std::string& s, CallArgs& a) { return justify(ev, s, a, "ljust", -1); }},
      {"rjust", [](Evaluator& ev, const std::string& s, CallArgs& a) { return justify(ev, s, a, "rjust", 1); }},
      {"center", [](Evaluator& ev, const std::string& s, CallArgs& a) { return justify(ev, s, a, "center", 0); }},
      {"format", format_method},
  };
  for (const auto& [n, fn] : kMethods)
    if (name == n) return fn;
  return nullptr;
}

}  // namespace

Value string_method(const Value& self, const std::string& name) {
  Method fn = find_method(name);
  if (!fn) return Value::undefined();
  return Value::callable(name, [self, fn](Evaluator& ev, CallArgs& args) { return fn(ev, self.str(), args); });
}

}  // namespace hyllm::jinja
