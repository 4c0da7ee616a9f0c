#include "text/jinja/evaluator.h"

#include "text/jinja/builtins.h"
#include "text/jinja/value_format.h"

namespace hyllm::jinja {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

struct Evaluator::DepthGuard {
  Evaluator& ev;
  explicit DepthGuard(Evaluator& e) : ev(e) {
    if (++ev.depth_ > ev.limits_.max_depth) {
      --ev.depth_;
      cap_fail("template evaluation nests deeper than {} levels", ev.limits_.max_depth);
    }
  }
  ~DepthGuard() { --ev.depth_; }
};

// Redirects output into a local buffer for the guard's lifetime.
struct Evaluator::OutputCapture {
  Evaluator& ev;
  std::string buffer;
  std::string* saved;
  explicit OutputCapture(Evaluator& e) : ev(e), saved(e.out_) { ev.out_ = &buffer; }
  ~OutputCapture() { ev.out_ = saved; }
};

namespace {

// jinja2's `loop` object for one iteration.
class LoopObject : public Object {
 public:
  LoopObject(std::shared_ptr<const ValueList> items, size_t index) : items_(std::move(items)), index_(index) {}

  Value attribute(std::string_view name) const override {
    auto n = static_cast<int64_t>(items_->size());
    auto i = static_cast<int64_t>(index_);
    if (name == "index") return Value::integer(i + 1);
    if (name == "index0") return Value::integer(i);
    if (name == "revindex") return Value::integer(n - i);
    if (name == "revindex0") return Value::integer(n - i - 1);
    if (name == "first") return Value::boolean(i == 0);
    if (name == "last") return Value::boolean(i == n - 1);
    if (name == "length") return Value::integer(n);
    if (name == "depth") return Value::integer(1);
    if (name == "depth0") return Value::integer(0);
    if (name == "previtem")
      return i > 0 ? (*items_)[index_ - 1] : Value::undefined("there is no previous item");
    if (name == "nextitem")
      return i + 1 < n ? (*items_)[index_ + 1] : Value::undefined("there is no next item");
    if (name == "cycle") {
      size_t idx = index_;
      return Value::callable("cycle", [idx](Evaluator&, CallArgs& args) -> Value {
        if (args.positional.empty()) render_fail("no items for cycling given");
        return args.positional[idx % args.positional.size()];
      });
    }
    return Value::undefined(fmt::format("'LoopContext' object has no attribute '{}'", name));
  }
  std::string type_name() const override { return "LoopContext"; }

 private:
  std::shared_ptr<const ValueList> items_;
  size_t index_;
};

void attach_pos(TemplateError& e, SourcePos pos) {
  if (!e.has_pos()) e.set_pos(pos);
}

}  // namespace

Evaluator::~Evaluator() {
  // Flat teardown: every namespace and scope stays referenced from these
  // vectors while its entries go, so nothing is destroyed recursively.
  for (auto& ns : namespaces_) ns->clear();
  for (auto& scope : macro_scopes_) scope->clear();
}

Value Evaluator::new_namespace(Dict entries) {
  charge(static_cast<int64_t>(entries.size()) + 1);
  auto ns = std::make_shared<Dict>(std::move(entries));
  namespaces_.push_back(ns);
  return Value::make_namespace(std::move(ns));
}

// ---- budget ----

void Evaluator::charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) cap_fail("template exceeded {} evaluation steps", limits_.max_steps);
}

void Evaluator::charge_bytes(size_t n) {
  if (n > limits_.max_output_bytes)
    cap_fail("template built a string of more than {} bytes", limits_.max_output_bytes);
  charge(static_cast<int64_t>(n / 64));
}

void Evaluator::count_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations)
    cap_fail("template exceeded {} loop iterations", limits_.max_loop_iterations);
}

void Evaluator::emit(const std::string& text) {
  if (out_->size() + text.size() > limits_.max_output_bytes)
    cap_fail("template output exceeds {} bytes", limits_.max_output_bytes);
  charge(static_cast<int64_t>(text.size() / 64));
  out_->append(text);
}

void Evaluator::emit_value(const Value& v) {
  if (v.is_string()) {
    emit(v.str());
    return;
  }
  emit(to_python_str(v));
}

// ---- statements ----

std::string Evaluator::render(const Body& body, const ScopePtr& root) {
  std::string out;
  out_ = &out;
  exec_body(body, root);
  out_ = nullptr;
  return out;
}

std::string Evaluator::render_to_string(const Body& body, const ScopePtr& scope) {
  OutputCapture capture(*this);
  exec_body(body, scope);
  return std::move(capture.buffer);
}

Evaluator::Flow Evaluator::exec_body(const Body& body, const ScopePtr& scope) {
  for (const auto& s : body) {
    Flow f = exec(*s, scope);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, const ScopePtr& scope) {
  DepthGuard guard(*this);
  charge(1);
  try {
    switch (s.kind) {
      case StmtKind::kData: emit(static_cast<const DataStmt&>(s).text); return Flow::kNormal;
      case StmtKind::kPrint: emit_value(eval(*static_cast<const PrintStmt&>(s).expr, scope)); return Flow::kNormal;
      case StmtKind::kIf: {
        const auto& st = static_cast<const IfStmt&>(s);
        for (const auto& [cond, body] : st.branches)
          if (eval(*cond, scope).truthy()) return exec_body(body, scope);
        return exec_body(st.else_body, scope);
      }
      case StmtKind::kFor: return exec_for(static_cast<const ForStmt&>(s), scope);
      case StmtKind::kSet: {
        const auto& st = static_cast<const SetStmt&>(s);
        exec_set(st.target, eval(*st.value, scope), scope);
        return Flow::kNormal;
      }
      case StmtKind::kSetBlock: {
        const auto& st = static_cast<const SetBlockStmt&>(s);
        Value text = Value::string(render_to_string(st.body, scope));
        exec_set(st.target, apply_filter_chain(st.filters, std::move(text), scope), scope);
        return Flow::kNormal;
      }
      case StmtKind::kMacro: {
        const auto& st = static_cast<const MacroStmt&>(s);
        macro_scopes_.push_back(scope);
        scope->set(st.name, make_macro(st.name, st.params, st.body, scope));
        return Flow::kNormal;
      }
      case StmtKind::kCallBlock: {
        const auto& st = static_cast<const CallBlockStmt&>(s);
        Value caller = make_macro("caller", st.params, st.body, scope);
        Value callee = eval(*st.call->callee, scope);
        CallArgs args = eval_args(st.call->args, scope);
        args.keyword.emplace_back("caller", std::move(caller));
        Value result;
        try {
          result = call(callee, args);
        } catch (TemplateError& e) {
          attach_pos(e, st.call->pos);
          throw;
        }
        emit_value(result);
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        const auto& st = static_cast<const FilterBlockStmt&>(s);
        Value text = Value::string(render_to_string(st.body, scope));
        emit_value(apply_filter_chain(st.filters, std::move(text), scope));
        return Flow::kNormal;
      }
      case StmtKind::kWith: {
        const auto& st = static_cast<const WithStmt&>(s);
        auto inner = std::make_shared<Scope>(scope);
        for (const auto& [target, expr] : st.assignments) exec_set(target, eval(*expr, scope), inner);
        return exec_body(st.body, inner);
      }
      case StmtKind::kScope: return exec_body(static_cast<const ScopeStmt&>(s).body, scope);
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
      case StmtKind::kUnsupported: render_fail("{}", static_cast<const UnsupportedStmt&>(s).what);
    }
  } catch (TemplateError& e) {
    attach_pos(e, s.pos);
    throw;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_for(const ForStmt& s, const ScopePtr& scope) {
  Value iterable = eval(*s.iterable, scope);
  ValueList all = iterate(iterable);
  if (s.filter) {
    ValueList kept;
    for (auto& item : all) {
      count_iterations(1);
      auto filter_scope = std::make_shared<Scope>(scope);
      exec_set(s.target, item, filter_scope);
      if (eval(*s.filter, filter_scope).truthy()) kept.push_back(std::move(item));
    }
    all = std::move(kept);
  }
  if (all.empty()) return exec_body(s.else_body, scope);
  auto items = std::make_shared<const ValueList>(std::move(all));
  for (size_t i = 0; i < items->size(); ++i) {
    count_iterations(1);
    // As in jinja2, each iteration starts from the enclosing scope: a `set`
    // in the body is visible for the rest of that iteration only.
    auto iteration = std::make_shared<Scope>(scope);
    exec_set(s.target, (*items)[i], iteration);
    iteration->set("loop", Value::object(std::make_shared<LoopObject>(items, i)));
    Flow f = exec_body(s.body, iteration);
    if (f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Evaluator::exec_set(const Target& target, Value value, const ScopePtr& scope) {
  if (target.is_tuple) {
    ValueList parts = iterate(value);
    if (parts.size() != target.items.size())
      render_fail("{} values to unpack (expected {}, got {})",
                  parts.size() > target.items.size() ? "too many" : "not enough", target.items.size(),
                  parts.size());
    for (size_t i = 0; i < parts.size(); ++i) exec_set(target.items[i], std::move(parts[i]), scope);
    return;
  }
  if (!target.attribute.empty()) {
    const Value* ns = scope->lookup(target.name);
    if (!ns || !ns->is_namespace())
      render_fail("cannot assign attribute on non-namespace object '{}'", target.name);
    ns->namespace_data().set(Value::string(target.attribute), std::move(value));
    return;
  }
  scope->set(target.name, std::move(value));
}

Value Evaluator::apply_filter_chain(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v,
                                   const ScopePtr& scope) {
  for (const auto& f : filters) v = eval_filter(*f, std::move(v), scope);
  return v;
}

Value Evaluator::make_macro(const std::string& name, const std::vector<MacroParam>& params, const Body& body,
                            const ScopePtr& closure) {
  const auto* params_ptr = &params;
  const auto* body_ptr = &body;
  return Value::callable(name, [name, params_ptr, body_ptr, closure](Evaluator& ev, CallArgs& args) -> Value {
    DepthGuard guard(ev);
    auto frame = std::make_shared<Scope>(closure);
    const auto& params = *params_ptr;
    ValueList varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) frame->set(params[i].name, std::move(args.positional[i]));
      else varargs.push_back(std::move(args.positional[i]));
    }
    Dict kwargs;
    std::vector<bool> bound(params.size(), false);
    for (size_t i = 0; i < params.size() && i < args.positional.size(); ++i) bound[i] = true;
    for (auto& [key, val] : args.keyword) {
      bool matched = false;
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].name == key) {
          if (bound[i]) render_fail("macro '{}' got multiple values for argument '{}'", name, key);
          frame->set(key, std::move(val));
          bound[i] = true;
          matched = true;
          break;
        }
      }
      if (!matched) {
        if (key == "caller") frame->set("caller", std::move(val));
        else kwargs.set(Value::string(key), std::move(val));
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) continue;
      if (params[i].default_value) frame->set(params[i].name, ev.eval(*params[i].default_value, frame));
      else frame->set(params[i].name, Value::undefined(fmt::format("parameter '{}' was not provided", params[i].name)));
    }
    frame->set("varargs", Value::list(std::move(varargs), true));
    frame->set("kwargs", Value::dict(std::move(kwargs)));
    return Value::string(ev.render_to_string(*body_ptr, frame));
  });
}

// ---- expressions ----

Value Evaluator::eval(const Expr& e, const ScopePtr& scope) {
  DepthGuard guard(*this);
  charge(1);
  try {
    return eval_inner(e, scope);
  } catch (TemplateError& err) {
    attach_pos(err, e.pos);
    throw;
  }
}

Value Evaluator::eval_inner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::kLiteral: return static_cast<const LiteralExpr&>(e).value;
    case ExprKind::kName: return eval_name(static_cast<const NameExpr&>(e), scope);
    case ExprKind::kList: {
      const auto& le = static_cast<const ListExpr&>(e);
      ValueList items;
      items.reserve(le.items.size());
      for (const auto& item : le.items) items.push_back(eval(*item, scope));
      return Value::list(std::move(items), le.is_tuple);
    }
    case ExprKind::kDict: {
      Dict d;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        Value key = eval(*k, scope);
        d.set(std::move(key), eval(*v, scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kAttribute: {
      const auto& ae = static_cast<const AttributeExpr&>(e);
      Value obj = eval(*ae.object, scope);
      if (obj.is_undefined()) raise_undefined(obj);
      return get_attribute(obj, ae.name);
    }
    case ExprKind::kItem: {
      const auto& ie = static_cast<const ItemExpr&>(e);
      Value obj = eval(*ie.object, scope);
      if (obj.is_undefined()) raise_undefined(obj);
      return get_item(obj, eval(*ie.index, scope));
    }
    case ExprKind::kSlice: {
      const auto& se = static_cast<const SliceExpr&>(e);
      Value obj = eval(*se.object, scope);
      if (obj.is_undefined()) raise_undefined(obj);
      Value start = se.start ? eval(*se.start, scope) : Value::none();
      Value stop = se.stop ? eval(*se.stop, scope) : Value::none();
      Value step = se.step ? eval(*se.step, scope) : Value::none();
      return get_slice(*this, obj, start, stop, step);
    }
    case ExprKind::kCall: return eval_call(static_cast<const CallExpr&>(e), scope);
    case ExprKind::kFilter: {
      const auto& fe = static_cast<const FilterExpr&>(e);
      return eval_filter(fe, eval(*fe.operand, scope), scope);
    }
    case ExprKind::kTest: return eval_test(static_cast<const TestExpr&>(e), scope);
    case ExprKind::kUnary: {
      const auto& ue = static_cast<const UnaryExpr&>(e);
      Value v = eval(*ue.operand, scope);
      switch (ue.op) {
        case UnaryOp::kNot: return Value::boolean(!v.truthy());
        case UnaryOp::kNeg: return op_neg(v);
        case UnaryOp::kPos:
          if (v.is_undefined()) raise_undefined(v);
          if (!v.is_number()) render_fail("bad operand type for unary +: '{}'", v.type_name());
          return v.is_bool() ? Value::integer(v.as_bool() ? 1 : 0) : v;
      }
      break;
    }
    case ExprKind::kBinary: return eval_binary(static_cast<const BinaryExpr&>(e), scope);
    case ExprKind::kCompare: return eval_compare(static_cast<const CompareExpr&>(e), scope);
    case ExprKind::kCondition: {
      const auto& ce = static_cast<const ConditionExpr&>(e);
      if (eval(*ce.condition, scope).truthy()) return eval(*ce.then_expr, scope);
      if (ce.else_expr) return eval(*ce.else_expr, scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    }
  }
  render_fail("internal error: unknown expression");
}

Value Evaluator::eval_name(const NameExpr& e, const ScopePtr& scope) {
  if (const Value* v = scope->lookup(e.name)) return *v;
  Value g = find_global(e.name);
  if (!g.is_undefined()) return g;
  return Value::undefined(fmt::format("'{}' is undefined", e.name));
}

Value Evaluator::eval_binary(const BinaryExpr& e, const ScopePtr& scope) {
  if (e.op == BinaryOp::kAnd) {
    Value left = eval(*e.left, scope);
    return left.truthy() ? eval(*e.right, scope) : left;
  }
  if (e.op == BinaryOp::kOr) {
    Value left = eval(*e.left, scope);
    return left.truthy() ? left : eval(*e.right, scope);
  }
  Value a = eval(*e.left, scope);
  Value b = eval(*e.right, scope);
  switch (e.op) {
    case BinaryOp::kAdd: return op_add(*this, a, b);
    case BinaryOp::kSub: return op_sub(a, b);
    case BinaryOp::kMul: return op_mul(*this, a, b);
    case BinaryOp::kDiv: return op_div(a, b);
    case BinaryOp::kFloorDiv: return op_floordiv(a, b);
    case BinaryOp::kMod: return op_mod(*this, a, b);
    case BinaryOp::kPow: return op_pow(a, b);
    case BinaryOp::kConcat: {
      std::string s = to_python_str(a);
      append_python_str(s, b);
      charge_bytes(s.size());
      return Value::string(std::move(s));
    }
    default: break;
  }
  render_fail("internal error: unknown operator");
}

Value Evaluator::eval_compare(const CompareExpr& e, const ScopePtr& scope) {
  Value left = eval(*e.first, scope);
  for (const auto& [op, expr] : e.rest) {
    Value right = eval(*expr, scope);
    bool ok = false;
    switch (op) {
      case CompareOp::kEq: ok = values_equal(left, right); break;
      case CompareOp::kNe: ok = !values_equal(left, right); break;
      case CompareOp::kLt: ok = compare_values(left, right) < 0; break;
      case CompareOp::kLe: ok = values_equal(left, right) || compare_values(left, right) < 0; break;
      case CompareOp::kGt: ok = compare_values(left, right) > 0; break;
      case CompareOp::kGe: ok = values_equal(left, right) || compare_values(left, right) > 0; break;
      case CompareOp::kIn: ok = contains(right, left); break;
      case CompareOp::kNotIn: ok = !contains(right, left); break;
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

CallArgs Evaluator::eval_args(const ArgList& args, const ScopePtr& scope) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const auto& a : args.positional) out.positional.push_back(eval(*a, scope));
  if (args.star_args) {
    for (auto& v : iterate(eval(*args.star_args, scope))) out.positional.push_back(std::move(v));
  }
  for (const auto& [k, v] : args.keyword) out.keyword.emplace_back(k, eval(*v, scope));
  if (args.star_kwargs) {
    Value d = eval(*args.star_kwargs, scope);
    if (!d.is_mapping()) render_fail("argument after ** must be a mapping, not {}", d.type_name());
    for (const auto& [k, v] : d.dict_data().entries()) {
      if (!k.is_string()) render_fail("keywords must be strings");
      out.keyword.emplace_back(k.str(), v);
    }
  }
  return out;
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) return callee.callable_data().call(*this, args);
  if (callee.is_undefined()) raise_undefined(callee);
  render_fail("'{}' object is not callable", callee.type_name());
}

Value Evaluator::eval_call(const CallExpr& e, const ScopePtr& scope) {
  Value callee = eval(*e.callee, scope);
  CallArgs args = eval_args(e.args, scope);
  return call(callee, args);
}

Value Evaluator::eval_filter(const FilterExpr& e, Value operand, const ScopePtr& scope) {
  FilterFn fn = find_filter(e.name);
  if (!fn) {
    TemplateError err(ErrorCode::kInvalidArgument, fmt::format("no filter named '{}'", e.name));
    err.set_pos(e.pos);
    throw err;
  }
  CallArgs args = eval_args(e.args, scope);
  try {
    return fn(*this, operand, args);
  } catch (TemplateError& err) {
    attach_pos(err, e.pos);
    throw;
  }
}

Value Evaluator::eval_test(const TestExpr& e, const ScopePtr& scope) {
  TestFn fn = find_test(e.name);
  if (!fn) render_fail("no test named '{}'", e.name);
  Value operand = eval(*e.operand, scope);
  CallArgs args = eval_args(e.args, scope);
  bool result = fn(*this, operand, args);
  return Value::boolean(e.negated ? !result : result);
}

}  // namespace hyllm::jinja
