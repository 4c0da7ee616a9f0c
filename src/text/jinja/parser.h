#pragma once
// Recursive-descent parser with jinja2's grammar and operator precedence
// (conditional < or < and < not < comparison < +,- < ~ < *,/,//,% < ** <
// unary < filters/tests < postfix).

#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace hyllm::jinja {

struct ParseOptions {
  LexerOptions lexer;
  // Nesting cap (statements inside statements, expressions inside
  // expressions) so hostile input cannot exhaust the C++ stack.
  int max_nesting = 200;
};

// Throws TemplateError: kCorruptData for syntax errors, kResourceExhausted
// when nesting exceeds the cap.
Body parse_template(std::string_view source, const ParseOptions& options = {});

}  // namespace hyllm::jinja
