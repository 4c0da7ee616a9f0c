// Global functions a chat template can call: jinja2's range, dict, namespace
// (plus joiner and cycler), and the two transformers adds: raise_exception and
// strftime_now. None of them touches files, the network or the environment;
// strftime_now reads only the clock.

#include <ctime>
#include <string_view>

#include "text/jinja/builtins.h"
#include "text/jinja/errors.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

namespace {

// jinja2's sandbox refuses larger ranges.
constexpr int64_t kMaxRange = 100000;

Value range_fn(Evaluator& ev, CallArgs& args) {
  if (!args.keyword.empty()) render_fail("range() takes no keyword arguments");
  auto arg = [&](size_t i) {
    const Value& v = args.positional[i];
    if (v.is_undefined()) raise_undefined(v);
    if (!v.is_int() && !v.is_bool())
      render_fail("'{}' object cannot be interpreted as an integer", v.type_name());
    return v.is_bool() ? int64_t{v.as_bool()} : v.as_int();
  };
  int64_t start = 0, stop = 0, step = 1;
  switch (args.positional.size()) {
    case 1: stop = arg(0); break;
    case 2: start = arg(0); stop = arg(1); break;
    case 3: start = arg(0); stop = arg(1); step = arg(2); break;
    default: render_fail("range expected 1 to 3 arguments, got {}", args.positional.size());
  }
  if (step == 0) render_fail("range() arg 3 must not be zero");
  long double count = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                               : (static_cast<long double>(start) - stop - step - 1) / -step;
  if (count > kMaxRange)
    cap_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
  ev.charge(static_cast<int64_t>(out.size()));
  return Value::list(std::move(out));
}

// dict(mapping_or_pairs, **kwargs) as Python builds it.
Dict build_dict(CallArgs& args, const char* fn) {
  Dict d;
  if (args.positional.size() > 1) render_fail("{} expected at most 1 argument, got {}", fn, args.positional.size());
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_mapping()) {
      for (const auto& [k, v] : src.dict_data().entries()) d.set(k, v);
    } else {
      for (const auto& pair : iterate(src)) {
        ValueList kv = iterate(pair);
        if (kv.size() != 2) render_fail("dictionary update sequence element has length {}; 2 is required", kv.size());
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) d.set(Value::string(k), v);
  return d;
}

Value raise_exception_fn(Evaluator&, CallArgs& args) {
  ArgReader r("raise_exception", args, {"message"});
  render_fail("{}", to_python_str(r.get(0)));
}

Value strftime_now_fn(Evaluator& ev, CallArgs& args) {
  ArgReader r("strftime_now", args, {"format"});
  if (!r.get(0).is_string()) render_fail("strftime() argument 1 must be str, not {}", r.get(0).type_name());
  const std::string& format = r.get(0).str();
  if (format.size() > 256) render_fail("strftime_now: format string too long");
  std::tm local{};
  if (ev.fixed_time()) {
    std::time_t t = static_cast<std::time_t>(*ev.fixed_time());
    gmtime_r(&t, &local);
  } else {
    std::time_t now = std::time(nullptr);
    localtime_r(&now, &local);
  }
  char buf[1024];
  size_t n = format.empty() ? 0 : std::strftime(buf, sizeof buf, format.c_str(), &local);
  return Value::string(std::string(buf, n));
}

}  // namespace

Value find_global(std::string_view name) {
  if (name == "range") return Value::callable("range", range_fn);
  if (name == "dict")
    return Value::callable("dict", [](Evaluator&, CallArgs& a) { return Value::dict(build_dict(a, "dict")); });
  if (name == "namespace")
    return Value::callable("namespace", [](Evaluator& ev, CallArgs& a) { return ev.new_namespace(build_dict(a, "namespace")); });
  if (name == "raise_exception") return Value::callable("raise_exception", raise_exception_fn);
  if (name == "strftime_now") return Value::callable("strftime_now", strftime_now_fn);
  if (name == "joiner")
    return Value::callable("joiner", [](Evaluator&, CallArgs& a) {
      ArgReader r("joiner", a, {"sep"});
      std::string sep = r.get_string(0, ", ");
      auto used = std::make_shared<bool>(false);
      return Value::callable("joiner", [sep, used](Evaluator&, CallArgs&) {
        if (!*used) {
          *used = true;
          return Value::string("");
        }
        return Value::string(sep);
      });
    });
  return Value::undefined();
}

}  // namespace hyllm::jinja
