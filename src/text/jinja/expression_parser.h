#pragma once
// Expressions in jinja2's grammar and precedence: conditional < or < and <
// not < comparison < +,- < ~ < *,/,//,% < ** < unary < filters/tests <
// postfix (attribute, subscript, call).

#include <memory>

#include "text/jinja/ast.h"
#include "text/jinja/parser_base.h"

namespace hyllm::jinja::detail {

class ExpressionParser : public ParserBase {
 public:
  explicit ExpressionParser(ParserState& state) : ParserBase(state) {}

  // An expression or a bare tuple "a, b". with_condexpr=false disallows
  // "x if c else y" (if conditions, for iterables); stop_at_if ends the tuple
  // at "if" (for-loop filters).
  ExprPtr parse_tuple(bool with_condexpr, bool stop_at_if = false);
  ExprPtr parse_expression(bool with_condexpr);
  std::unique_ptr<FilterExpr> parse_filter(ExprPtr operand);

 private:
  bool at_tuple_end(bool stop_at_if) const;
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_args(ArgList& args);
  ExprPtr parse_call(ExprPtr node);
  ExprPtr parse_test(ExprPtr operand);
};

}  // namespace hyllm::jinja::detail
