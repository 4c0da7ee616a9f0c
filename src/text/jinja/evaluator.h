#pragma once
// Tree-walking evaluation of a parsed template. One Evaluator serves one
// render call (it owns the counters and output buffers), so concurrent
// renders of the same parsed template never share mutable state.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace hyllm::jinja {

// Sandbox caps; hitting one fails the render with kResourceExhausted.
struct RenderLimits {
  int64_t max_steps = 10'000'000;          // expression and statement evaluations, plus 1 per 64 bytes built
  int64_t max_loop_iterations = 1'000'000; // all for-loop iterations of one render together
  int max_depth = 500;                     // nesting of evaluation: statements, expressions, macro calls
  size_t max_output_bytes = 64u << 20;     // the rendered text, and any single string built on the way
};

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  void clear() { vars_.clear(); }

 private:
  std::unordered_map<std::string, Value> vars_;
  std::shared_ptr<Scope> parent_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Evaluator {
 public:
  // fixed_time: the instant (Unix seconds, formatted in UTC) strftime_now
  // reports instead of the local clock.
  explicit Evaluator(const RenderLimits& limits, std::optional<int64_t> fixed_time = std::nullopt)
      : limits_(limits), fixed_time_(fixed_time) {}
  // Empties every namespace and macro-defining scope of the render: they are
  // the only values that can form reference cycles (a namespace holding
  // itself, a scope holding a macro that captures the scope).
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Renders `body` with `root` as the outermost scope.
  std::string render(const Body& body, const ScopePtr& root);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value call(const Value& callee, CallArgs& args);
  // namespace(): a mutable dict released when the render ends.
  Value new_namespace(Dict entries);

  // Budget accounting used by builtins.
  void charge(int64_t steps);
  // Charges for building a string of n bytes and checks the size cap.
  void charge_bytes(size_t n);
  void count_iterations(int64_t n);
  const RenderLimits& limits() const { return limits_; }
  const std::optional<int64_t>& fixed_time() const { return fixed_time_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  struct DepthGuard;
  struct OutputCapture;

  Flow exec_body(const Body& body, const ScopePtr& scope);
  Flow exec(const Stmt& s, const ScopePtr& scope);
  Flow exec_for(const ForStmt& s, const ScopePtr& scope);
  void exec_set(const Target& target, Value value, const ScopePtr& scope);
  std::string render_to_string(const Body& body, const ScopePtr& scope);
  Value apply_filter_chain(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v,
                           const ScopePtr& scope);
  Value make_macro(const std::string& name, const std::vector<MacroParam>& params, const Body& body,
                   const ScopePtr& closure);
  void emit(const std::string& text);
  void emit_value(const Value& v);

  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_name(const NameExpr& e, const ScopePtr& scope);
  Value eval_binary(const BinaryExpr& e, const ScopePtr& scope);
  Value eval_compare(const CompareExpr& e, const ScopePtr& scope);
  Value eval_call(const CallExpr& e, const ScopePtr& scope);
  Value eval_filter(const FilterExpr& e, Value operand, const ScopePtr& scope);
  Value eval_test(const TestExpr& e, const ScopePtr& scope);
  CallArgs eval_args(const ArgList& args, const ScopePtr& scope);

  RenderLimits limits_;
  std::optional<int64_t> fixed_time_;
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
  int depth_ = 0;
  std::string* out_ = nullptr;
  std::vector<std::shared_ptr<Dict>> namespaces_;
  std::vector<ScopePtr> macro_scopes_;
};

}  // namespace hyllm::jinja
