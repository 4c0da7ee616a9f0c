#include "text/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "text/jinja/errors.h"

namespace hyllm::jinja {

Value Value::undefined(std::string hint) {
  UndefinedData d;
  if (!hint.empty()) d.hint = std::make_shared<const std::string>(std::move(hint));
  return Value(std::move(d));
}

Value Value::string(std::string s) {
  return Value(std::make_shared<const std::string>(std::move(s)));
}

uint32_t value_depth(const Value& v) {
  if (v.is_list()) return v.list_data().depth;
  if (v.is_dict()) return v.dict_data().depth();
  return 0;
}

namespace {
void check_depth(uint32_t depth) {
  if (depth > kMaxValueDepth) cap_fail("a value nests deeper than {} levels", kMaxValueDepth);
}
}  // namespace

Value Value::list(ValueList items, bool is_tuple) {
  uint32_t depth = 0;
  for (const auto& item : items) depth = std::max(depth, value_depth(item));
  check_depth(depth + 1);
  auto data = std::make_shared<ListData>();
  data->depth = depth + 1;
  data->items = std::move(items);
  data->is_tuple = is_tuple;
  return Value(ListPtr(std::move(data)));
}

Value Value::dict(Dict d) { return Value(DictPtr(std::make_shared<const Dict>(std::move(d)))); }

Value Value::make_namespace(std::shared_ptr<Dict> d) { return Value(std::move(d)); }

Value Value::callable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn) {
  return Value(CallablePtr(std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)})));
}

Value Value::object(std::shared_ptr<const Object> obj) { return Value(std::move(obj)); }

double Value::to_double() const {
  switch (kind()) {
    case ValueKind::kBool: return as_bool() ? 1.0 : 0.0;
    case ValueKind::kInt: return static_cast<double>(as_int());
    case ValueKind::kFloat: return as_float();
    default: render_fail("expected a number, got {}", type_name());
  }
}

const Dict& Value::dict_data() const {
  if (is_namespace()) return *std::get<NamespacePtr>(data_);
  return *std::get<DictPtr>(data_);
}

Dict& Value::namespace_data() const { return *std::get<NamespacePtr>(data_); }

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  const auto& d = std::get<UndefinedData>(data_);
  return d.hint ? *d.hint : kEmpty;
}

bool Value::truthy() const {
  switch (kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return false;
    case ValueKind::kBool: return as_bool();
    case ValueKind::kInt: return as_int() != 0;
    case ValueKind::kFloat: return as_float() != 0.0;
    case ValueKind::kString: return !str().empty();
    case ValueKind::kList: return !items().empty();
    case ValueKind::kDict: return dict_data().size() > 0;
    case ValueKind::kNamespace:
    case ValueKind::kCallable:
    case ValueKind::kObject: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind()) {
    case ValueKind::kUndefined: return "Undefined";
    case ValueKind::kNone: return "NoneType";
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt: return "int";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return "str";
    case ValueKind::kList: return is_tuple() ? "tuple" : "list";
    case ValueKind::kDict: return "dict";
    case ValueKind::kNamespace: return "Namespace";
    case ValueKind::kCallable: return "function";
    case ValueKind::kObject: return object_data().type_name();
  }
  return "object";
}

// ---- Dict ----

const Value* Dict::find(const Value& key) const {
  auto it = index_.find(hash_key(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* Dict::find(std::string_view key) const {
  std::string k;
  k.reserve(key.size() + 1);
  k += 's';
  k += key;
  auto it = index_.find(k);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::clear() {
  entries_.clear();
  index_.clear();
  depth_ = 1;
}

void Dict::set(Value key, Value value) {
  uint32_t depth = std::max(value_depth(key), value_depth(value)) + 1;
  check_depth(depth);
  depth_ = std::max(depth_, depth);
  std::string k = hash_key(key);
  auto it = index_.find(k);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(std::move(k), entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

// ---- comparisons ----

namespace {

bool is_numeric(const Value& v) { return v.is_int() || v.is_float() || v.is_bool(); }

int64_t int_of(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }

}  // namespace

bool values_equal(const Value& a, const Value& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    return int_of(a) == int_of(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return true;
    case ValueKind::kString: return a.str() == b.str();
    case ValueKind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case ValueKind::kDict: {
      const Dict& x = a.dict_data();
      const Dict& y = b.dict_data();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case ValueKind::kNamespace: return &a.dict_data() == &b.dict_data();
    case ValueKind::kCallable: return &a.callable_data() == &b.callable_data();
    case ValueKind::kObject: return &a.object_data() == &b.object_data();
    default: return false;
  }
}

int compare_values(const Value& a, const Value& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_float() || b.is_float()) {
      double x = a.to_double(), y = b.to_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = int_of(a), y = int_of(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // Byte order of UTF-8 is code point order, which is Python's str order.
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined() || b.is_undefined())
    render_fail("{} is undefined", a.is_undefined() && !a.undefined_hint().empty()
                                        ? a.undefined_hint()
                                        : (b.undefined_hint().empty() ? "a value" : b.undefined_hint()));
  render_fail("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

namespace {
// A one-letter kind tag followed by text (built by append: GCC 12 warns
// spuriously about `"x" + std::string`).
std::string tagged(char tag, std::string_view text) {
  std::string k(1, tag);
  k.append(text);
  return k;
}
}  // namespace

std::string hash_key(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kString: return tagged('s', v.str());
    case ValueKind::kBool: return v.as_bool() ? "i1" : "i0";
    case ValueKind::kInt: return tagged('i', std::to_string(v.as_int()));
    case ValueKind::kFloat: {
      double f = v.as_float();
      if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18)
        return tagged('i', std::to_string(static_cast<int64_t>(f)));
      uint64_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      return tagged('f', std::to_string(bits));
    }
    case ValueKind::kNone: return "n";
    case ValueKind::kList:
      if (v.is_tuple()) {
        std::string k = "t(";
        for (const auto& item : v.items()) {
          k += hash_key(item);
          k += '\x1f';
        }
        return k + ")";
      }
      break;
    default: break;
  }
  render_fail("unhashable type: '{}'", v.type_name());
}

}  // namespace hyllm::jinja
