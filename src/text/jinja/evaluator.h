#pragma once
// Tree-walking evaluation of a parsed template. One Evaluator serves one
// render call (it owns the counters and output buffers), so concurrent
// renders of the same parsed template never share mutable state.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

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

 private:
  std::unordered_map<std::string, Value> vars_;
  std::shared_ptr<Scope> parent_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Evaluator {
 public:
  explicit Evaluator(const RenderLimits& limits) : limits_(limits) {}

  // Renders `body` with `root` as the outermost scope.
  std::string render(const Body& body, const ScopePtr& root);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value call(const Value& callee, CallArgs& args);

  // Budget accounting used by builtins.
  void charge(int64_t steps);
  // Charges for building a string of n bytes and checks the size cap.
  void charge_bytes(size_t n);
  void count_iterations(int64_t n);
  const RenderLimits& limits() const { return limits_; }

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
                   const ScopePtr& closure, Value caller);
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
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
  int depth_ = 0;
  std::string* out_ = nullptr;
};

}  // namespace hyllm::jinja
