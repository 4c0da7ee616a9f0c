#pragma once
// The values a template computes with. They follow Python semantics because
// chat templates are written against jinja2 running on Python: int vs float,
// truthiness, ==/< across types, str() and repr() output.
//
// Strings, lists and dicts are shared immutable payloads (jinja2 under
// transformers runs in ImmutableSandboxedEnvironment, where lists and dicts
// cannot be modified), so copying a Value is cheap and sharing is safe. The one
// mutable container is the namespace() object, which only `set ns.attr = ...`
// writes.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace hyllm::jinja {

class Value;
class Evaluator;
using ValueList = std::vector<Value>;

enum class ValueKind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,      // also tuples (ListData::is_tuple)
  kDict,
  kNamespace, // jinja2's namespace(): a dict whose entries are attributes
  kCallable,  // builtins, bound methods, macros
  kObject,    // loop and other attribute-only objects
};

// Arguments of a call, after evaluation.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  std::string name;
  std::function<Value(Evaluator&, CallArgs&)> call;
};

// Read-only objects with computed attributes (e.g. `loop`).
class Object {
 public:
  virtual ~Object() = default;
  virtual Value attribute(std::string_view name) const = 0;
  virtual std::string type_name() const = 0;
};

// Lists and dicts nest at most this deep (a cap, so that the recursive
// printing, comparison and destruction of values stays within the stack).
// Namespaces count as leaves: they are mutable, and nothing recurses into
// them except printing, which has its own guard.
constexpr uint32_t kMaxValueDepth = 512;

struct ListData {
  ValueList items;
  bool is_tuple = false;
  uint32_t depth = 1;  // 1 + the deepest element
};

// An insertion-ordered dict like Python's; keys are hashable Values.
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts, or replaces the value in place keeping the key's position.
  void set(Value key, Value value);
  // Defined after Value: std::pair<Value, Value> needs the complete type.
  size_t size() const;
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  // 1 + the deepest key or value (an upper bound once values are replaced).
  uint32_t depth() const { return depth_; }
  void clear();

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
  uint32_t depth_ = 1;
};

class Value {
 public:
  Value() : data_(UndefinedData{}) {}

  static Value undefined(std::string hint = {});
  static Value none() { return Value(NoneData{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value number(double f) { return Value(f); }
  static Value string(std::string s);
  static Value list(ValueList items, bool is_tuple = false);
  static Value dict(Dict d);
  static Value make_namespace(std::shared_ptr<Dict> d);
  static Value callable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn);
  static Value object(std::shared_ptr<const Object> obj);

  ValueKind kind() const { return static_cast<ValueKind>(data_.index()); }
  bool is_undefined() const { return kind() == ValueKind::kUndefined; }
  bool is_none() const { return kind() == ValueKind::kNone; }
  bool is_bool() const { return kind() == ValueKind::kBool; }
  bool is_int() const { return kind() == ValueKind::kInt; }
  bool is_float() const { return kind() == ValueKind::kFloat; }
  // Python's numbers.Number: bool counts.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == ValueKind::kString; }
  bool is_list() const { return kind() == ValueKind::kList; }
  bool is_tuple() const { return is_list() && list_data().is_tuple; }
  bool is_dict() const { return kind() == ValueKind::kDict; }
  bool is_namespace() const { return kind() == ValueKind::kNamespace; }
  bool is_mapping() const { return is_dict() || is_namespace(); }
  bool is_callable() const { return kind() == ValueKind::kCallable; }
  bool is_object() const { return kind() == ValueKind::kObject; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  // Numeric value of an int, float or bool.
  double to_double() const;
  const std::string& str() const { return *std::get<StringPtr>(data_); }
  const ListData& list_data() const { return *std::get<ListPtr>(data_); }
  const ValueList& items() const { return list_data().items; }
  // Dict payload of a dict or namespace.
  const Dict& dict_data() const;
  // The mutable payload of a namespace.
  Dict& namespace_data() const;
  const Callable& callable_data() const { return *std::get<CallablePtr>(data_); }
  const Object& object_data() const { return *std::get<ObjectPtr>(data_); }
  // What an undefined value was meant to be, for error messages.
  const std::string& undefined_hint() const;

  // Python's bool(x).
  bool truthy() const;
  // Python's type(x).__name__ (jinja2 names in messages).
  std::string type_name() const;

 private:
  struct UndefinedData {
    std::shared_ptr<const std::string> hint;
  };
  struct NoneData {};
  using StringPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<const Dict>;
  using NamespacePtr = std::shared_ptr<Dict>;
  using CallablePtr = std::shared_ptr<const Callable>;
  using ObjectPtr = std::shared_ptr<const Object>;
  // Alternative order matches ValueKind.
  using Data = std::variant<UndefinedData, NoneData, bool, int64_t, double, StringPtr, ListPtr,
                            DictPtr, NamespacePtr, CallablePtr, ObjectPtr>;

  template <typename T>
  explicit Value(T v) : data_(std::move(v)) {}

  Data data_;
};

inline size_t Dict::size() const { return entries_.size(); }

// How deep a value nests: 0 for scalars and namespaces.
uint32_t value_depth(const Value& v);

// Python ==.
bool values_equal(const Value& a, const Value& b);
// Python <: -1, 0, 1. Throws a TypeError-like failure (kInvalidArgument) when
// the types do not order, as Python does.
int compare_values(const Value& a, const Value& b);
// A string that is equal for keys Python treats as the same dict key (1, 1.0
// and True collide as in Python). Throws for unhashable values.
std::string hash_key(const Value& v);

}  // namespace hyllm::jinja
