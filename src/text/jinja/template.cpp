#include "text/jinja/template.h"

#include "text/jinja/parser.h"

namespace hyllm::jinja {

namespace {

[[noreturn]] void rethrow(const TemplateError& e, const char* stage) {
  if (e.has_pos())
    fail(e.code(), "chat template {} error at line {}, column {}: {}", stage, e.pos().line, e.pos().column,
         e.message());
  fail(e.code(), "chat template {} error: {}", stage, e.message());
}

}  // namespace

Template Template::parse(std::string_view source, const TemplateOptions& options) {
  Template t;
  t.options_ = options;
  ParseOptions po;
  po.max_nesting = options.max_parse_nesting;
  try {
    t.body_ = std::make_shared<const Body>(parse_template(source, po));
  } catch (const TemplateError& e) {
    rethrow(e, "syntax");
  }
  return t;
}

std::string Template::render(const Variables& variables) const {
  auto root = std::make_shared<Scope>();
  for (const auto& [name, value] : variables) root->set(name, value);
  Evaluator ev(options_.limits, options_.fixed_time);
  try {
    return ev.render(*body_, root);
  } catch (const TemplateError& e) {
    rethrow(e, "render");
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::kResourceExhausted, "chat template render error: out of memory");
  }
}

namespace {

Value convert_json(const nlohmann::ordered_json& j, int depth) {
  using nlohmann::ordered_json;
  if (depth > 256) fail(ErrorCode::kInvalidArgument, "chat template input nests deeper than 256 levels");
  switch (j.type()) {
    case ordered_json::value_t::null: return Value::none();
    case ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(convert_json(x, depth + 1));
      return Value::list(std::move(items));
    }
    case ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.set(Value::string(k), convert_json(v, depth + 1));
      return Value::dict(std::move(d));
    }
    default: fail(ErrorCode::kInvalidArgument, "chat template input holds a JSON value of unsupported type");
  }
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& j) { return convert_json(j, 0); }

}  // namespace hyllm::jinja
