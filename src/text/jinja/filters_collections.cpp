// jinja2's builtin filters on sequences and mappings: first/last/join/list,
// sort/unique/reverse, dictsort/items, select/reject(attr), map, sum/min/max,
// batch.

#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/errors.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

FilterFn find_collection_filter(std::string_view name);

namespace {

ValueList seq_of(Evaluator& ev, const Value& v) {
  ValueList items = iterate(v);
  ev.charge(static_cast<int64_t>(items.size()));
  return items;
}

// jinja2's make_attrgetter: "a.b.0" walks items/attributes, digits index.
Value get_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_undefined()) raise_undefined(cur);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    cur = digits ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(utf8::lower(v.str()));
  return v;
}

// Sort key for sort/unique/min/max: the attribute (comma-separated list
// gives a tuple) with case folding.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  if (attribute.is_none() || attribute.is_undefined()) return fold_case(item, case_sensitive);
  if (attribute.is_int()) return fold_case(get_item(item, attribute), case_sensitive);
  std::string attr = to_python_str(attribute);
  if (attr.find(',') == std::string::npos) return fold_case(get_path(item, attr), case_sensitive);
  ValueList parts;
  size_t start = 0;
  while (true) {
    size_t comma = attr.find(',', start);
    parts.push_back(fold_case(get_path(item, attr.substr(start, comma == std::string::npos ? std::string::npos : comma - start)), case_sensitive));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Value::list(std::move(parts), true);
}

Value f_first(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("first", a, {});
  if (v.is_list()) return v.items().empty() ? Value::undefined("No first item, sequence was empty.") : v.items().front();
  ValueList items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Evaluator&, const Value& v, CallArgs& a) {
  ArgReader r("last", a, {});
  if (v.is_list()) return v.items().empty() ? Value::undefined("No last item, sequence was empty.") : v.items().back();
  ValueList items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_join(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("join", a, {"d", "attribute"});
  std::string sep = r.get_string(0, "");
  std::string out;
  bool first = true;
  for (const auto& item : seq_of(ev, v)) {
    if (!first) out += sep;
    first = false;
    if (r.has(1) && !r.get(1).is_none()) append_python_str(out, sort_key(item, r.get(1), true));
    else append_python_str(out, item);
    ev.charge_bytes(out.size());
  }
  return Value::string(std::move(out));
}

Value f_list(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("list", a, {});
  return Value::list(seq_of(ev, v));
}

Value f_reverse(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("reverse", a, {});
  if (v.is_string()) {
    std::u32string cps = utf8::decode(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8::encode(cps));
  }
  ValueList items = seq_of(ev, v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

void sort_by_key(ValueList& items, const Value& attribute, bool case_sensitive, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (auto& item : items) keyed.emplace_back(sort_key(item, attribute, case_sensitive), std::move(item));
  // Python's sort is stable in both directions (reverse keeps equal items' order).
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? compare_values(y.first, x.first) < 0 : compare_values(x.first, y.first) < 0;
  });
  items.clear();
  for (auto& [k, item] : keyed) items.push_back(std::move(item));
}

Value f_sort(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("sort", a, {"reverse", "case_sensitive", "attribute"});
  ValueList items = seq_of(ev, v);
  ev.charge(static_cast<int64_t>(items.size()) * 8);
  sort_by_key(items, r.get_or(2, Value::none()), r.get_bool(1, false), r.get_bool(0, false));
  return Value::list(std::move(items));
}

Value f_unique(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("unique", a, {"case_sensitive", "attribute"});
  ValueList out;
  std::vector<Value> seen;
  for (auto& item : seq_of(ev, v)) {
    Value key = sort_key(item, r.get_or(1, Value::none()), r.get_bool(0, false));
    bool dup = false;
    for (const auto& s : seen) {
      ev.charge(1);
      if (values_equal(s, key)) {
        dup = true;
        break;
      }
    }
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(std::move(item));
  }
  return Value::list(std::move(out));
}

Value extreme(Evaluator& ev, const Value& v, CallArgs& a, bool want_max) {
  ArgReader r(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  ValueList items = seq_of(ev, v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  Value attribute = r.get_or(1, Value::none());
  bool cs = r.get_bool(0, false);
  size_t best = 0;
  Value best_key = sort_key(items[0], attribute, cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], attribute, cs);
    int c = compare_values(key, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_min(Evaluator& ev, const Value& v, CallArgs& a) { return extreme(ev, v, a, false); }
Value f_max(Evaluator& ev, const Value& v, CallArgs& a) { return extreme(ev, v, a, true); }

Value f_sum(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("sum", a, {"attribute", "start"});
  Value total = r.get_or(1, Value::integer(0));
  for (const auto& item : seq_of(ev, v)) {
    Value x = r.has(0) && !r.get(0).is_none() ? sort_key(item, r.get(0), true) : item;
    total = op_add(ev, total, x);
  }
  return total;
}

Value f_dictsort(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_mapping()) render_fail("dictsort: expected a mapping, got {}", v.type_name());
  std::string by = r.get_string(1, "key");
  if (by != "key" && by != "value") render_fail("You can only sort by either \"key\" or \"value\"");
  ValueList pairs;
  for (const auto& [k, val] : v.dict_data().entries()) pairs.push_back(Value::list({k, val}, true));
  ev.charge(static_cast<int64_t>(pairs.size()) * 8);
  sort_by_key(pairs, Value::integer(by == "key" ? 0 : 1), r.get_bool(0, false), r.get_bool(2, false));
  return Value::list(std::move(pairs));
}

Value f_items(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("items", a, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_mapping()) render_fail("Can only get item pairs from a mapping.");
  ValueList pairs;
  for (const auto& [k, val] : v.dict_data().entries()) pairs.push_back(Value::list({k, val}, true));
  ev.charge(static_cast<int64_t>(pairs.size()));
  return Value::list(std::move(pairs));
}

// select/reject/selectattr/rejectattr share this: keep items whose (attribute
// of) value passes the named test, or is truthy when no test is named.
Value select_impl(Evaluator& ev, const Value& v, CallArgs& a, bool with_attribute, bool keep_if, const char* fn) {
  size_t next = 0;
  Value attribute;
  if (with_attribute) {
    if (a.positional.empty()) render_fail("{}() missing the attribute argument", fn);
    attribute = a.positional[next++];
  }
  TestFn test = nullptr;
  if (next < a.positional.size()) {
    std::string name = to_python_str(a.positional[next++]);
    test = find_test(name);
    if (!test) render_fail("no test named '{}'", name);
  }
  CallArgs test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(next), a.positional.end());
  test_args.keyword = a.keyword;
  ValueList out;
  for (auto& item : seq_of(ev, v)) {
    Value subject = with_attribute ? sort_key(item, attribute, true) : item;
    bool pass;
    if (test) {
      CallArgs copy = test_args;
      pass = test(ev, subject, copy);
    } else {
      pass = subject.truthy();
    }
    if (pass == keep_if) out.push_back(std::move(item));
  }
  return Value::list(std::move(out));
}

Value f_select(Evaluator& ev, const Value& v, CallArgs& a) { return select_impl(ev, v, a, false, true, "select"); }
Value f_reject(Evaluator& ev, const Value& v, CallArgs& a) { return select_impl(ev, v, a, false, false, "reject"); }
Value f_selectattr(Evaluator& ev, const Value& v, CallArgs& a) { return select_impl(ev, v, a, true, true, "selectattr"); }
Value f_rejectattr(Evaluator& ev, const Value& v, CallArgs& a) { return select_impl(ev, v, a, true, false, "rejectattr"); }

Value f_map(Evaluator& ev, const Value& v, CallArgs& a) {
  ValueList out;
  if (a.positional.empty()) {
    Value attribute, fallback;
    bool has_default = false;
    for (auto& [k, val] : a.keyword) {
      if (k == "attribute") attribute = val;
      else if (k == "default") {
        fallback = val;
        has_default = true;
      } else {
        render_fail("map() got an unexpected keyword argument '{}'", k);
      }
    }
    if (attribute.is_undefined()) render_fail("map requires a filter name or attribute=");
    for (const auto& item : seq_of(ev, v)) {
      Value x = sort_key(item, attribute, true);
      out.push_back(x.is_undefined() && has_default ? fallback : x);
    }
    return Value::list(std::move(out));
  }
  std::string name = to_python_str(a.positional[0]);
  FilterFn filter = find_filter(name);
  if (!filter) render_fail("no filter named '{}'", name);
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const auto& item : seq_of(ev, v)) {
    CallArgs copy = rest;
    out.push_back(filter(ev, item, copy));
  }
  return Value::list(std::move(out));
}

Value f_batch(Evaluator& ev, const Value& v, CallArgs& a) {
  ArgReader r("batch", a, {"linecount", "fill_with"});
  int64_t n = r.get_int(0, 1);
  if (n <= 0) render_fail("batch size must be positive");
  ValueList out, cur;
  for (auto& item : seq_of(ev, v)) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (r.has(1) && !r.get(1).is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(r.get(1));
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

const std::pair<const char*, FilterFn> kCollectionFilters[] = {
    {"first", f_first},       {"last", f_last},         {"join", f_join},       {"list", f_list},
    {"reverse", f_reverse},   {"sort", f_sort},         {"unique", f_unique},   {"min", f_min},
    {"max", f_max},           {"sum", f_sum},           {"dictsort", f_dictsort}, {"items", f_items},
    {"select", f_select},     {"reject", f_reject},     {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr}, {"map", f_map},       {"batch", f_batch},
};

}  // namespace

FilterFn find_collection_filter(std::string_view name) {
  for (const auto& [n, fn] : kCollectionFilters)
    if (name == n) return fn;
  return nullptr;
}

}  // namespace hyllm::jinja
