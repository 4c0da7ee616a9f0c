#pragma once
// Splits template source into tokens the way jinja2's lexer does under the
// transformers chat-template settings: trim_blocks and lstrip_blocks on,
// `-`/`+` whitespace control, newlines normalised to "\n", one trailing
// newline dropped (keep_trailing_newline off), comments removed and
// {% raw %} bodies passed through as data.

#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/errors.h"

namespace hyllm::jinja {

enum class TokenType {
  kData,         // literal template text (already whitespace-controlled)
  kVarBegin,     // {{
  kVarEnd,       // }}
  kBlockBegin,   // {%
  kBlockEnd,     // %}
  kName,
  kString,       // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,     // text holds the operator, e.g. "==", "("
  kEnd,
};

struct Token {
  TokenType type;
  std::string text;
  SourcePos pos;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws TemplateError(kCorruptData) for malformed source.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

}  // namespace hyllm::jinja
