#include "text/jinja/parser.h"

#include <initializer_list>

#include "text/jinja/expression_parser.h"

namespace hyllm::jinja {

namespace {

using detail::ExpressionParser;
using detail::ParserBase;
using detail::ParserState;

class Parser : public ParserBase {
 public:
  explicit Parser(ParserState& state) : ParserBase(state), expr_(state) {}

  Body parse_root() {
    Body body = parse_body({});
    if (cur().type != TokenType::kEnd) fail(fmt::format("unexpected '{}'", cur().text));
    return body;
  }

 private:
  ExprPtr parse_tuple(bool with_condexpr, bool stop_at_if = false) { return expr_.parse_tuple(with_condexpr, stop_at_if); }
  ExprPtr parse_expression(bool with_condexpr) { return expr_.parse_expression(with_condexpr); }
  std::unique_ptr<FilterExpr> parse_filter(ExprPtr operand) { return expr_.parse_filter(std::move(operand)); }

  // ---- statements ----

  // Parses until a block tag whose name is in `stops` (left current, after
  // the "{%") or the end of input.
  Body parse_body(std::initializer_list<const char*> stops) {
    DepthGuard guard(*this);
    Body body;
    while (cur().type != TokenType::kEnd) {
      const Token& t = cur();
      if (t.type == TokenType::kData) {
        body.push_back(std::make_unique<DataStmt>(t.pos, t.text));
        advance();
      } else if (t.type == TokenType::kVarBegin) {
        SourcePos p = t.pos;
        advance();
        ExprPtr e = parse_tuple(true);
        if (cur().type != TokenType::kVarEnd)
          fail(fmt::format("expected end of print statement, got {}", describe(cur())));
        advance();
        body.push_back(std::make_unique<PrintStmt>(p, std::move(e)));
      } else if (t.type == TokenType::kBlockBegin) {
        const Token& name = peek();
        if (name.type == TokenType::kName) {
          for (const char* s : stops) {
            if (name.text == s) {
              advance();  // leave the stop name current
              return body;
            }
          }
        }
        advance();
        body.push_back(parse_statement());
      } else {
        fail(fmt::format("unexpected {}", describe(t)));
      }
    }
    if (stops.size() > 0) {
      std::string expected;
      for (const char* s : stops) expected += (expected.empty() ? "'" : " or '") + std::string(s) + "'";
      fail(fmt::format("unexpected end of template, expected {}", expected));
    }
    return body;
  }

  // Consumes "endX" (with an optional trailing name for endmacro/endblock) and "%}".
  void finish_end_tag(const char* end_name) {
    if (!skip_name(end_name)) fail(fmt::format("expected '{}'", end_name));
    if (cur().type == TokenType::kName) advance();  // {% endblock name %}
    expect_block_end();
  }

  StmtPtr parse_statement() {
    if (cur().type != TokenType::kName) fail(fmt::format("expected a statement name, got {}", describe(cur())));
    SourcePos p = cur().pos;
    std::string tag = cur().text;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "block" || tag == "generation") {
      advance();
      if (tag == "block") expect_name();
      expect_block_end();
      auto s = std::make_unique<ScopeStmt>(p);
      std::string end = "end" + tag;
      s->body = tag == "block" ? parse_body({"endblock"}) : parse_body({"endgeneration"});
      finish_end_tag(end.c_str());
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(fmt::format("'{}' outside of a for loop", tag));
      advance();
      expect_block_end();
      return std::make_unique<Stmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, p);
    }
    if (tag == "include" || tag == "import" || tag == "from" || tag == "extends") {
      // No loader exists: a template can never reach files. Fails when reached.
      while (cur().type != TokenType::kBlockEnd && cur().type != TokenType::kEnd) advance();
      expect_block_end();
      return std::make_unique<UnsupportedStmt>(
          p, fmt::format("'{}' is not supported: chat templates cannot load other templates", tag));
    }
    fail(fmt::format("unknown tag '{}'", tag));
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<IfStmt>(cur().pos);
    advance();  // if
    while (true) {
      ExprPtr cond = parse_tuple(false);
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (skip_name("elif")) continue;
      if (skip_name("else")) {
        expect_block_end();
        s->else_body = parse_body({"endif"});
      }
      finish_end_tag("endif");
      return s;
    }
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<ForStmt>(cur().pos);
    advance();  // for
    s->target = parse_assign_target(false);
    if (!skip_name("in")) fail("expected 'in' in for loop");
    s->iterable = parse_tuple(false, /*stop_at_if=*/true);
    if (skip_name("if")) s->filter = parse_expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"});
    --loop_depth_;
    if (skip_name("else")) {
      expect_block_end();
      s->else_body = parse_body({"endfor"});
    }
    finish_end_tag("endfor");
    return s;
  }

  StmtPtr parse_set() {
    SourcePos p = cur().pos;
    advance();  // set
    Target target = parse_assign_target(true);
    if (skip_op("=")) {
      auto s = std::make_unique<SetStmt>(p);
      s->target = std::move(target);
      s->value = parse_tuple(true);
      expect_block_end();
      return s;
    }
    auto s = std::make_unique<SetBlockStmt>(p);
    s->target = std::move(target);
    while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
    expect_block_end();
    s->body = parse_body({"endset"});
    finish_end_tag("endset");
    return s;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam param;
      param.name = expect_name();
      if (skip_op("=")) param.default_value = parse_expression(true);
      params.push_back(std::move(param));
    }
    expect_op(")");
    return params;
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<MacroStmt>(cur().pos);
    advance();  // macro
    s->name = expect_name();
    s->params = parse_params();
    expect_block_end();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endmacro"});
    loop_depth_ = saved_loops;
    finish_end_tag("endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = std::make_unique<CallBlockStmt>(cur().pos);
    advance();  // call
    if (is_op("(")) s->params = parse_params();
    ExprPtr e = parse_expression(true);
    if (e->kind != ExprKind::kCall) fail_at(e->pos, "expected a call after 'call'");
    s->call.reset(static_cast<CallExpr*>(e.release()));
    expect_block_end();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endcall"});
    loop_depth_ = saved_loops;
    finish_end_tag("endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<FilterBlockStmt>(cur().pos);
    advance();  // filter
    s->filters.push_back(parse_filter(nullptr));
    while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
    expect_block_end();
    s->body = parse_body({"endfilter"});
    finish_end_tag("endfilter");
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<WithStmt>(cur().pos);
    advance();  // with
    while (cur().type != TokenType::kBlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      Target t = parse_assign_target(false);
      expect_op("=");
      s->assignments.emplace_back(std::move(t), parse_expression(true));
    }
    expect_block_end();
    s->body = parse_body({"endwith"});
    finish_end_tag("endwith");
    return s;
  }

  // name | name.attr (with_namespace) | a, b | (a, b)
  Target parse_assign_target(bool with_namespace) {
    Target first = parse_single_target(with_namespace);
    if (!is_op(",")) return first;
    Target tuple;
    tuple.is_tuple = true;
    tuple.items.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type != TokenType::kName && !is_op("(")) break;
      if (is_name("in")) break;
      tuple.items.push_back(parse_single_target(false));
    }
    return tuple;
  }

  Target parse_single_target(bool with_namespace) {
    DepthGuard guard(*this);
    if (skip_op("(")) {
      Target t = parse_assign_target(false);
      if (!t.is_tuple) {
        Target wrap;
        wrap.is_tuple = true;
        wrap.items.push_back(std::move(t));
        t = std::move(wrap);
      }
      expect_op(")");
      return t;
    }
    Target t;
    t.name = expect_name();
    if (t.name == "true" || t.name == "false" || t.name == "none" || t.name == "True" ||
        t.name == "False" || t.name == "None")
      fail(fmt::format("cannot assign to '{}'", t.name));
    if (with_namespace && skip_op(".")) t.attribute = expect_name();
    return t;
  }

  ExpressionParser expr_;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source, const ParseOptions& options) {
  ParserState state;
  state.tokens = tokenize(source, options.lexer);
  state.max_nesting = options.max_nesting;
  return Parser(state).parse_root();
}

}  // namespace hyllm::jinja
