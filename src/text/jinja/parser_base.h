#pragma once
// Token-stream helpers shared by the statement and expression parsers, which
// advance one ParserState together.

#include <string>
#include <vector>

#include "text/jinja/lexer.h"

namespace hyllm::jinja::detail {

struct ParserState {
  std::vector<Token> tokens;
  size_t pos = 0;
  int depth = 0;        // current nesting, checked against max_nesting
  int max_nesting = 0;
};

class ParserBase {
 public:
  explicit ParserBase(ParserState& state) : state_(&state) {}

 protected:
  const Token& cur() const { return state_->tokens[state_->pos]; }
  const Token& peek(size_t n = 1) const {
    size_t i = state_->pos + n;
    return state_->tokens[i < state_->tokens.size() ? i : state_->tokens.size() - 1];
  }
  const Token& advance() {
    const Token& t = state_->tokens[state_->pos];
    if (state_->pos + 1 < state_->tokens.size()) ++state_->pos;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::kOperator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  [[noreturn]] void fail(const std::string& message) const { fail_at(cur().pos, message); }
  [[noreturn]] static void fail_at(SourcePos pos, const std::string& message) {
    TemplateError e(ErrorCode::kCorruptData, message);
    e.set_pos(pos);
    throw e;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::kEnd: return "end of template";
      case TokenType::kBlockEnd: return "end of statement block";
      case TokenType::kVarEnd: return "end of print statement";
      case TokenType::kData: return "template data";
      case TokenType::kString: return "string";
      default: return "'" + t.text + "'";
    }
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName) fail(fmt::format("expected a name, got {}", describe(cur())));
    return advance().text;
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd)
      fail(fmt::format("expected end of statement block, got {}", describe(cur())));
    advance();
  }

  struct DepthGuard {
    ParserState& s;
    explicit DepthGuard(ParserBase& parser) : s(*parser.state_) {
      if (++s.depth > s.max_nesting) {
        TemplateError e(ErrorCode::kResourceExhausted,
                        fmt::format("template nests deeper than {} levels", s.max_nesting));
        e.set_pos(s.tokens[s.pos].pos);
        throw e;
      }
    }
    ~DepthGuard() { --s.depth; }
  };

  // Left-associative chains (a + b + c, x|f|g, a.b.c) build trees as deep
  // as they are long: each link counts as one level of nesting until the
  // chain's parse ends.
  struct ChainGuard {
    ParserState& s;
    int links = 0;
    explicit ChainGuard(ParserBase& parser) : s(*parser.state_) {}
    void add() {
      ++links;
      if (++s.depth > s.max_nesting) {
        TemplateError e(ErrorCode::kResourceExhausted,
                        fmt::format("template nests deeper than {} levels", s.max_nesting));
        e.set_pos(s.tokens[s.pos].pos);
        throw e;
      }
    }
    ~ChainGuard() { s.depth -= links; }
  };

  ParserState* state_;
};

}  // namespace hyllm::jinja::detail
