#pragma once
// The parsed template: expression and statement nodes. Nodes are immutable
// after parsing, so one tree serves any number of concurrent renders.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/errors.h"
#include "text/jinja/value.h"

namespace hyllm::jinja {

// ---- expressions ----

enum class ExprKind {
  kLiteral,
  kName,
  kList,      // list or tuple display
  kDict,
  kAttribute, // x.name
  kItem,      // x[i]
  kSlice,     // x[a:b:c]
  kCall,
  kFilter,    // x | f(args)
  kTest,      // x is t(args)
  kUnary,
  kBinary,
  kCompare,
  kCondition, // a if c else b
};

struct Expr {
  explicit Expr(ExprKind k, SourcePos p) : kind(k), pos(p) {}
  virtual ~Expr() = default;
  ExprKind kind;
  SourcePos pos;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct LiteralExpr : Expr {
  LiteralExpr(SourcePos p, Value v) : Expr(ExprKind::kLiteral, p), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(SourcePos p, std::string n) : Expr(ExprKind::kName, p), name(std::move(n)) {}
  std::string name;
};

struct ListExpr : Expr {
  ListExpr(SourcePos p, bool t) : Expr(ExprKind::kList, p), is_tuple(t) {}
  std::vector<ExprPtr> items;
  bool is_tuple;
};

struct DictExpr : Expr {
  explicit DictExpr(SourcePos p) : Expr(ExprKind::kDict, p) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct AttributeExpr : Expr {
  AttributeExpr(SourcePos p, ExprPtr o, std::string n)
      : Expr(ExprKind::kAttribute, p), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

struct ItemExpr : Expr {
  ItemExpr(SourcePos p, ExprPtr o, ExprPtr i)
      : Expr(ExprKind::kItem, p), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;
};

struct SliceExpr : Expr {
  SliceExpr(SourcePos p, ExprPtr o) : Expr(ExprKind::kSlice, p), object(std::move(o)) {}
  ExprPtr object;
  ExprPtr start, stop, step;  // each may be null
};

struct CallExpr : Expr {
  CallExpr(SourcePos p, ExprPtr c) : Expr(ExprKind::kCall, p), callee(std::move(c)) {}
  ExprPtr callee;
  ArgList args;
};

struct FilterExpr : Expr {
  FilterExpr(SourcePos p, ExprPtr o, std::string n)
      : Expr(ExprKind::kFilter, p), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;  // null inside {% filter %} blocks and block sets
  std::string name;
  ArgList args;
};

struct TestExpr : Expr {
  TestExpr(SourcePos p, ExprPtr o, std::string n, bool neg)
      : Expr(ExprKind::kTest, p), operand(std::move(o)), name(std::move(n)), negated(neg) {}
  ExprPtr operand;
  std::string name;
  ArgList args;
  bool negated;
};

enum class UnaryOp { kNot, kNeg, kPos };

struct UnaryExpr : Expr {
  UnaryExpr(SourcePos p, UnaryOp o, ExprPtr x) : Expr(ExprKind::kUnary, p), op(o), operand(std::move(x)) {}
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kAnd, kOr };

struct BinaryExpr : Expr {
  BinaryExpr(SourcePos p, BinaryOp o, ExprPtr l, ExprPtr r)
      : Expr(ExprKind::kBinary, p), op(o), left(std::move(l)), right(std::move(r)) {}
  BinaryOp op;
  ExprPtr left, right;
};

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct CompareExpr : Expr {
  CompareExpr(SourcePos p, ExprPtr f) : Expr(ExprKind::kCompare, p), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct ConditionExpr : Expr {
  ConditionExpr(SourcePos p, ExprPtr t, ExprPtr c, ExprPtr e)
      : Expr(ExprKind::kCondition, p), then_expr(std::move(t)), condition(std::move(c)), else_expr(std::move(e)) {}
  ExprPtr then_expr, condition, else_expr;  // else_expr may be null (undefined)
};

// ---- statements ----

enum class StmtKind {
  kData,
  kPrint,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kScope,        // {% generation %}, {% block %}: renders its body in place
  kBreak,
  kContinue,
  kUnsupported,  // include/import/extends: fails when reached
};

struct Stmt {
  explicit Stmt(StmtKind k, SourcePos p) : kind(k), pos(p) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  SourcePos pos;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Where for/set assign: a name, `ns.attr`, or a tuple of targets.
struct Target {
  std::string name;
  std::string attribute;  // set for `name.attribute`
  std::vector<Target> items;
  bool is_tuple = false;
};

struct DataStmt : Stmt {
  DataStmt(SourcePos p, std::string t) : Stmt(StmtKind::kData, p), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt : Stmt {
  PrintStmt(SourcePos p, ExprPtr e) : Stmt(StmtKind::kPrint, p), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(SourcePos p) : Stmt(StmtKind::kIf, p) {}
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(SourcePos p) : Stmt(StmtKind::kFor, p) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // {% for x in xs if cond %}
  Body body;
  Body else_body;
};

struct SetStmt : Stmt {
  explicit SetStmt(SourcePos p) : Stmt(StmtKind::kSet, p) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(SourcePos p) : Stmt(StmtKind::kSetBlock, p) {}
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;  // applied in order to the body text
  Body body;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct MacroStmt : Stmt {
  explicit MacroStmt(SourcePos p) : Stmt(StmtKind::kMacro, p) {}
  std::string name;
  std::vector<MacroParam> params;
  Body body;
};

struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(SourcePos p) : Stmt(StmtKind::kCallBlock, p) {}
  std::vector<MacroParam> params;  // of the caller() the body becomes
  std::unique_ptr<CallExpr> call;
  Body body;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(SourcePos p) : Stmt(StmtKind::kFilterBlock, p) {}
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(SourcePos p) : Stmt(StmtKind::kWith, p) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct ScopeStmt : Stmt {
  explicit ScopeStmt(SourcePos p) : Stmt(StmtKind::kScope, p) {}
  Body body;
};

struct UnsupportedStmt : Stmt {
  UnsupportedStmt(SourcePos p, std::string w) : Stmt(StmtKind::kUnsupported, p), what(std::move(w)) {}
  std::string what;
};

}  // namespace hyllm::jinja
