#include "text/jinja/expression_parser.h"

#include <cerrno>
#include <cstdlib>

namespace hyllm::jinja::detail {

bool ExpressionParser::at_tuple_end(bool stop_at_if) const {
  const Token& t = cur();
  if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || t.type == TokenType::kEnd) return true;
  if (t.type == TokenType::kOperator && (t.text == ")" || t.text == "=")) return true;
  if (stop_at_if && t.type == TokenType::kName && (t.text == "if" || t.text == "recursive")) return true;
  return false;
}

ExprPtr ExpressionParser::parse_tuple(bool with_condexpr, bool stop_at_if) {
  SourcePos p = cur().pos;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (at_tuple_end(stop_at_if)) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (items.empty()) fail(fmt::format("expected an expression, got {}", describe(cur())));
    return std::move(items[0]);
  }
  auto t = std::make_unique<ListExpr>(p, true);
  t->items = std::move(items);
  return t;
}

ExprPtr ExpressionParser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExpressionParser::parse_condexpr() {
  ChainGuard chain(*this);
  ExprPtr expr = parse_or();
  while (is_name("if")) {
    chain.add();
    SourcePos p = cur().pos;
    advance();
    ExprPtr cond = parse_or();
    ExprPtr otherwise;
    if (skip_name("else")) otherwise = parse_condexpr();
    expr = std::make_unique<ConditionExpr>(p, std::move(expr), std::move(cond), std::move(otherwise));
  }
  return expr;
}

ExprPtr ExpressionParser::parse_or() {
  ChainGuard chain(*this);
  ExprPtr left = parse_and();
  while (is_name("or")) {
    chain.add();
    SourcePos p = advance().pos;
    left = std::make_unique<BinaryExpr>(p, BinaryOp::kOr, std::move(left), parse_and());
  }
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  ChainGuard chain(*this);
  ExprPtr left = parse_not();
  while (is_name("and")) {
    chain.add();
    SourcePos p = advance().pos;
    left = std::make_unique<BinaryExpr>(p, BinaryOp::kAnd, std::move(left), parse_not());
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    SourcePos p = advance().pos;
    return std::make_unique<UnaryExpr>(p, UnaryOp::kNot, parse_not());
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  SourcePos p = cur().pos;
  ExprPtr first = parse_math1();
  std::unique_ptr<CompareExpr> cmp;
  while (true) {
    CompareOp op;
    if (is_op("==")) op = CompareOp::kEq;
    else if (is_op("!=")) op = CompareOp::kNe;
    else if (is_op("<")) op = CompareOp::kLt;
    else if (is_op("<=")) op = CompareOp::kLe;
    else if (is_op(">")) op = CompareOp::kGt;
    else if (is_op(">=")) op = CompareOp::kGe;
    else if (is_name("in")) op = CompareOp::kIn;
    else if (is_name("not") && peek().type == TokenType::kName && peek().text == "in") {
      advance();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    advance();
    if (!cmp) cmp = std::make_unique<CompareExpr>(p, std::move(first));
    cmp->rest.emplace_back(op, parse_math1());
  }
  if (cmp) return cmp;
  return first;
}

ExprPtr ExpressionParser::parse_math1() {
  ChainGuard chain(*this);
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    chain.add();
    SourcePos p = cur().pos;
    BinaryOp op = advance().text == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
    left = std::make_unique<BinaryExpr>(p, op, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr ExpressionParser::parse_concat() {
  ChainGuard chain(*this);
  ExprPtr left = parse_math2();
  while (is_op("~")) {
    chain.add();
    SourcePos p = advance().pos;
    left = std::make_unique<BinaryExpr>(p, BinaryOp::kConcat, std::move(left), parse_math2());
  }
  return left;
}

ExprPtr ExpressionParser::parse_math2() {
  ChainGuard chain(*this);
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    chain.add();
    SourcePos p = cur().pos;
    const std::string& t = advance().text;
    BinaryOp op = t == "*" ? BinaryOp::kMul : t == "/" ? BinaryOp::kDiv : t == "//" ? BinaryOp::kFloorDiv : BinaryOp::kMod;
    left = std::make_unique<BinaryExpr>(p, op, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr ExpressionParser::parse_pow() {
  ChainGuard chain(*this);
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    chain.add();
    SourcePos p = advance().pos;
    left = std::make_unique<BinaryExpr>(p, BinaryOp::kPow, std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    SourcePos p = cur().pos;
    UnaryOp op = advance().text == "-" ? UnaryOp::kNeg : UnaryOp::kPos;
    node = std::make_unique<UnaryExpr>(p, op, parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& t = cur();
  SourcePos p = t.pos;
  switch (t.type) {
    case TokenType::kName: {
      const std::string& n = t.text;
      Value lit;
      bool is_literal = true;
      if (n == "true" || n == "True") lit = Value::boolean(true);
      else if (n == "false" || n == "False") lit = Value::boolean(false);
      else if (n == "none" || n == "None") lit = Value::none();
      else is_literal = false;
      std::string name = n;
      advance();
      if (is_literal) return std::make_unique<LiteralExpr>(p, std::move(lit));
      return std::make_unique<NameExpr>(p, std::move(name));
    }
    case TokenType::kString: {
      std::string s = advance().text;
      while (cur().type == TokenType::kString) s += advance().text;
      return std::make_unique<LiteralExpr>(p, Value::string(std::move(s)));
    }
    case TokenType::kInteger: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(t.text.c_str(), &end, 10);
      if (errno == ERANGE) fail("integer literal out of range");
      advance();
      return std::make_unique<LiteralExpr>(p, Value::integer(v));
    }
    case TokenType::kFloat: {
      double v = std::strtod(t.text.c_str(), nullptr);
      advance();
      return std::make_unique<LiteralExpr>(p, Value::number(v));
    }
    case TokenType::kOperator:
      if (t.text == "(") {
        advance();
        if (skip_op(")")) return std::make_unique<ListExpr>(p, true);
        ExprPtr e = parse_tuple(true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") {
        advance();
        auto list = std::make_unique<ListExpr>(p, false);
        while (!is_op("]")) {
          if (!list->items.empty()) expect_op(",");
          if (is_op("]")) break;
          list->items.push_back(parse_expression(true));
        }
        expect_op("]");
        return list;
      }
      if (t.text == "{") {
        advance();
        auto dict = std::make_unique<DictExpr>(p);
        while (!is_op("}")) {
          if (!dict->items.empty()) expect_op(",");
          if (is_op("}")) break;
          ExprPtr key = parse_expression(true);
          expect_op(":");
          dict->items.emplace_back(std::move(key), parse_expression(true));
        }
        expect_op("}");
        return dict;
      }
      break;
    default: break;
  }
  fail(fmt::format("unexpected {}", describe(t)));
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  ChainGuard chain(*this);
  while (true) {
    chain.add();
    if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
    else if (is_op("(")) node = parse_call(std::move(node));
    else return node;
  }
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr node) {
  ChainGuard chain(*this);
  while (true) {
    chain.add();
    if (is_op("|")) {
      advance();
      node = parse_filter(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr node) {
  SourcePos p = node->pos;  // errors point at the start of the whole access
  if (skip_op(".")) {
    if (cur().type == TokenType::kName)
      return std::make_unique<AttributeExpr>(p, std::move(node), advance().text);
    if (cur().type == TokenType::kInteger) {
      Value idx = Value::integer(std::strtoll(advance().text.c_str(), nullptr, 10));
      return std::make_unique<ItemExpr>(p, std::move(node), std::make_unique<LiteralExpr>(p, idx));
    }
    fail(fmt::format("expected a name after '.', got {}", describe(cur())));
  }
  expect_op("[");
  std::vector<ExprPtr> parts;
  ExprPtr result;
  bool tuple = false;
  while (!is_op("]")) {
    if (!parts.empty() || result) {
      expect_op(",");
      tuple = true;
    }
    if (is_op("]")) break;
    SourcePos sp = cur().pos;
    ExprPtr start;
    if (!is_op(":")) start = parse_expression(true);
    if (is_op(":")) {
      if (tuple || !parts.empty()) fail("slices inside tuple subscripts are not supported");
      advance();
      auto slice = std::make_unique<SliceExpr>(sp, std::move(node));
      slice->start = std::move(start);
      if (!is_op("]") && !is_op(":") && !is_op(",")) slice->stop = parse_expression(true);
      if (skip_op(":") && !is_op("]") && !is_op(",")) slice->step = parse_expression(true);
      expect_op("]");
      return slice;
    }
    parts.push_back(std::move(start));
  }
  expect_op("]");
  if (parts.empty()) fail_at(p, "expected a subscript");
  ExprPtr index;
  if (parts.size() == 1 && !tuple) {
    index = std::move(parts[0]);
  } else {
    auto t = std::make_unique<ListExpr>(p, true);
    t->items = std::move(parts);
    index = std::move(t);
  }
  return std::make_unique<ItemExpr>(p, std::move(node), std::move(index));
}

void ExpressionParser::parse_args(ArgList& args) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("**")) {
      advance();
      args.star_kwargs = parse_expression(true);
    } else if (is_op("*")) {
      advance();
      args.star_args = parse_expression(true);
    } else if (cur().type == TokenType::kName && peek().type == TokenType::kOperator && peek().text == "=") {
      std::string key = advance().text;
      advance();  // =
      args.keyword.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!args.keyword.empty()) fail("positional argument follows keyword argument");
      args.positional.push_back(parse_expression(true));
    }
  }
  expect_op(")");
}

ExprPtr ExpressionParser::parse_call(ExprPtr node) {
  DepthGuard guard(*this);
  SourcePos start = node->pos;
  auto call = std::make_unique<CallExpr>(start, std::move(node));
  parse_args(call->args);
  return call;
}

std::unique_ptr<FilterExpr> ExpressionParser::parse_filter(ExprPtr operand) {
  DepthGuard guard(*this);
  SourcePos p = cur().pos;
  std::string name = expect_name();
  while (skip_op(".")) name.append(".").append(expect_name());
  auto f = std::make_unique<FilterExpr>(p, std::move(operand), std::move(name));
  if (is_op("(")) parse_args(f->args);
  return f;
}

ExprPtr ExpressionParser::parse_test(ExprPtr operand) {
  DepthGuard guard(*this);
  SourcePos p = advance().pos;  // is
  bool negated = skip_name("not");
  std::string name = expect_name();
  while (skip_op(".")) name.append(".").append(expect_name());
  auto t = std::make_unique<TestExpr>(p, std::move(operand), std::move(name), negated);
  if (is_op("(")) {
    parse_args(t->args);
  } else {
    const Token& c = cur();
    bool starts_arg = c.type == TokenType::kName || c.type == TokenType::kString ||
                      c.type == TokenType::kInteger || c.type == TokenType::kFloat ||
                      (c.type == TokenType::kOperator && (c.text == "(" || c.text == "[" || c.text == "{"));
    if (starts_arg && !(c.type == TokenType::kName && (c.text == "else" || c.text == "or" || c.text == "and"))) {
      if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
      ExprPtr arg = parse_postfix(parse_primary());
      t->args.positional.push_back(std::move(arg));
    }
  }
  return t;
}

}  // namespace hyllm::jinja::detail
