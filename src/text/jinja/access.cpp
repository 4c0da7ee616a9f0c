// Attribute, item and slice access with jinja2's sandboxed semantics:
// `x.name` prefers a method, then an entry; `x[key]` prefers an entry, then an
// attribute; anything missing is undefined (an error only once it is used);
// methods that would modify a list or dict are refused, as
// ImmutableSandboxedEnvironment does.

#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/errors.h"
#include "text/jinja/string_methods.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

namespace {

Value bind_method(const std::string& name, Value self,
           Value (*fn)(Evaluator&, const Value& self, CallArgs& args)) {
  return Value::callable(name, [self = std::move(self), fn](Evaluator& ev, CallArgs& args) {
    return fn(ev, self, args);
  });
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.type_name()));
}

bool is_one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "items")
    return bind_method(name, self, [](Evaluator& ev, const Value& d, CallArgs& args) {
      ArgReader r("items", args, {});
      ValueList out;
      for (const auto& [k, v] : d.dict_data().entries()) out.push_back(Value::list({k, v}, true));
      ev.charge(static_cast<int64_t>(out.size()));
      return Value::list(std::move(out));
    });
  if (name == "keys")
    return bind_method(name, self, [](Evaluator& ev, const Value& d, CallArgs& args) {
      ArgReader r("keys", args, {});
      ValueList out;
      for (const auto& [k, v] : d.dict_data().entries()) out.push_back(k);
      ev.charge(static_cast<int64_t>(out.size()));
      return Value::list(std::move(out));
    });
  if (name == "values")
    return bind_method(name, self, [](Evaluator& ev, const Value& d, CallArgs& args) {
      ArgReader r("values", args, {});
      ValueList out;
      for (const auto& [k, v] : d.dict_data().entries()) out.push_back(v);
      ev.charge(static_cast<int64_t>(out.size()));
      return Value::list(std::move(out));
    });
  if (name == "get")
    return bind_method(name, self, [](Evaluator&, const Value& d, CallArgs& args) {
      ArgReader r("get", args, {"key", "default"});
      if (!r.has(0)) render_fail("get expected at least 1 argument, got 0");
      const Value* v = d.dict_data().find(r.get(0));
      return v ? *v : r.get_or(1, Value::none());
    });
  if (name == "copy")
    return bind_method(name, self, [](Evaluator&, const Value& d, CallArgs&) { return Value::dict(d.dict_data()); });
  if (is_one_of(name, {"pop", "popitem", "setdefault", "update", "clear"})) return unsafe(self, name);
  return Value::undefined();
}

Value list_method(const Value& self, const std::string& name) {
  if (name == "index")
    return bind_method(name, self, [](Evaluator&, const Value& l, CallArgs& args) {
      ArgReader r("index", args, {"value"});
      const auto& items = l.items();
      for (size_t i = 0; i < items.size(); ++i)
        if (values_equal(items[i], r.get(0))) return Value::integer(static_cast<int64_t>(i));
      render_fail("{} is not in list", to_python_repr(r.get(0)));
    });
  if (name == "count")
    return bind_method(name, self, [](Evaluator&, const Value& l, CallArgs& args) {
      ArgReader r("count", args, {"value"});
      int64_t n = 0;
      for (const auto& x : l.items()) n += values_equal(x, r.get(0)) ? 1 : 0;
      return Value::integer(n);
    });
  if (name == "copy" && !self.is_tuple())
    return bind_method(name, self, [](Evaluator&, const Value& l, CallArgs&) { return Value::list(l.items()); });
  if (!self.is_tuple() && is_one_of(name, {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}))
    return unsafe(self, name);
  return Value::undefined();
}

std::string missing_attribute_hint(const Value& obj, const std::string& name) {
  if (obj.is_none()) return fmt::format("'None' has no attribute '{}'", name);
  return fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name);
}

// Python index normalisation; returns false when out of range.
bool normalize_index(int64_t& i, int64_t n) {
  if (i < 0) i += n;
  return i >= 0 && i < n;
}

}  // namespace

Value get_attribute(const Value& obj, const std::string& name) {
  Value found;
  switch (obj.kind()) {
    case ValueKind::kUndefined: raise_undefined(obj);
    case ValueKind::kDict:
      found = dict_method(obj, name);
      if (found.is_undefined() && found.undefined_hint().empty()) {
        if (const Value* v = obj.dict_data().find(std::string_view(name))) return *v;
      }
      break;
    case ValueKind::kNamespace:
      if (const Value* v = obj.dict_data().find(std::string_view(name))) return *v;
      break;
    case ValueKind::kList: found = list_method(obj, name); break;
    case ValueKind::kString: found = string_method(obj, name); break;
    case ValueKind::kObject: return obj.object_data().attribute(name);
    default: break;
  }
  if (!found.is_undefined() || !found.undefined_hint().empty()) return found;
  return Value::undefined(missing_attribute_hint(obj, name));
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case ValueKind::kUndefined: raise_undefined(obj);
    case ValueKind::kDict: {
      if (key.is_list() && !key.is_tuple()) render_fail("unhashable type: 'list'");
      if (key.is_dict()) render_fail("unhashable type: 'dict'");
      if (const Value* v = obj.dict_data().find(key)) return *v;
      break;
    }
    case ValueKind::kList:
    case ValueKind::kString: {
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.is_bool() ? key.as_bool() : key.as_int();
        if (obj.is_list()) {
          if (normalize_index(i, static_cast<int64_t>(obj.items().size()))) return obj.items()[i];
        } else {
          std::u32string cps = utf8::decode(obj.str());
          if (normalize_index(i, static_cast<int64_t>(cps.size())))
            return Value::string(utf8::encode(cps.substr(static_cast<size_t>(i), 1)));
        }
        return Value::undefined(fmt::format("{} object has no element {}", obj.type_name(), to_python_repr(key)));
      }
      break;
    }
    default: break;
  }
  if (key.is_string()) return get_attribute(obj, key.str());
  if (obj.is_none()) return Value::undefined(fmt::format("'None' has no element {}", to_python_repr(key)));
  return Value::undefined(fmt::format("{} object has no element {}", obj.type_name(), to_python_repr(key)));
}

namespace {

int64_t slice_bound(const Value& v, const char* what) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  render_fail("slice {} must be an integer or None, not {}", what, v.type_name());
}

// Python's slice.indices(n) followed by index enumeration.
std::vector<int64_t> slice_indices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v) {
  int64_t step = step_v.is_none() ? 1 : slice_bound(step_v, "step");
  if (step == 0) render_fail("slice step cannot be zero");
  int64_t lower = step < 0 ? -1 : 0;
  int64_t upper = step < 0 ? n - 1 : n;
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t i = slice_bound(v, "index");
    if (i < 0) {
      i += n;
      if (i < lower) i = lower;
    } else if (i > upper) {
      i = upper;
    }
    return i;
  };
  int64_t start = clamp(start_v, step < 0 ? upper : lower);
  int64_t stop = clamp(stop_v, step < 0 ? lower : upper);
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) out.push_back(i);
  } else {
    for (int64_t i = start; i > stop; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace

Value get_slice(Evaluator& ev, const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_list()) {
    const auto& items = obj.items();
    auto idx = slice_indices(static_cast<int64_t>(items.size()), start, stop, step);
    ev.charge(static_cast<int64_t>(idx.size()));
    ValueList out;
    out.reserve(idx.size());
    for (int64_t i : idx) out.push_back(items[static_cast<size_t>(i)]);
    return Value::list(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    std::u32string cps = utf8::decode(obj.str());
    auto idx = slice_indices(static_cast<int64_t>(cps.size()), start, stop, step);
    std::u32string out;
    out.reserve(idx.size());
    for (int64_t i : idx) out += cps[static_cast<size_t>(i)];
    std::string s = utf8::encode(out);
    ev.charge_bytes(s.size());
    return Value::string(std::move(s));
  }
  render_fail("'{}' object is not subscriptable", obj.type_name());
}

}  // namespace hyllm::jinja
