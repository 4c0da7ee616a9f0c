// Error reporting: syntax errors are kCorruptData, render failures
// kInvalidArgument, and both say where (line, column) and what failed.

#include <gtest/gtest.h>

#include <string>

#include "text/jinja/template.h"
#include "util/status.h"

namespace hyllm::jinja {
namespace {

struct Failure {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
};

Failure parse_failure(const std::string& source) {
  try {
    Template::parse(source);
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {};
}

Failure render_failure(const std::string& source, const Variables& vars = {}) {
  try {
    Template::parse(source).render(vars);
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {};
}

void expect_contains(const std::string& haystack, const std::string& needle) {
  EXPECT_NE(haystack.find(needle), std::string::npos) << "'" << needle << "' not in: " << haystack;
}

TEST(SyntaxErrors, SayWhereAndWhat) {
  Failure f = parse_failure("line one\n{% if x %}\n  {{ x + }}\n{% endif %}");
  EXPECT_EQ(f.code, ErrorCode::kCorruptData);
  expect_contains(f.message, "line 3, column 10");
  expect_contains(f.message, "unexpected end of print statement");

  f = parse_failure("{% for x in xs %}\n{{ x }}");
  EXPECT_EQ(f.code, ErrorCode::kCorruptData);
  expect_contains(f.message, "'endfor'");

  f = parse_failure("ab\n  {% frobnicate %}");
  expect_contains(f.message, "line 2, column 6");
  expect_contains(f.message, "unknown tag 'frobnicate'");

  f = parse_failure("{{ 'unterminated }}");
  expect_contains(f.message, "line 1, column 4");
  expect_contains(f.message, "unexpected end of string");

  f = parse_failure("{# open comment");
  expect_contains(f.message, "missing end of comment tag");

  f = parse_failure("{{ foo(1, ) ] }}");
  EXPECT_EQ(f.code, ErrorCode::kCorruptData);
  expect_contains(f.message, "unexpected ']'");

  f = parse_failure("{% set 1 = 2 %}");
  expect_contains(f.message, "expected a name");

  f = parse_failure("{% continue %}");
  expect_contains(f.message, "outside of a for loop");
}

TEST(RenderErrors, RaiseExceptionMessageAndPosition) {
  Failure f = render_failure("x\n{% if true %}\n    {{ raise_exception('Conversation roles must alternate') }}\n{% endif %}");
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument);
  expect_contains(f.message, "line 3, column 8");
  expect_contains(f.message, "Conversation roles must alternate");
}

TEST(RenderErrors, UndefinedUseNamesTheCulprit) {
  Failure f = render_failure("{{ messages[0].content }}\n{{ user.name.first }}", {{"messages", Value::list({})}});
  // messages[0] is undefined (empty list); reading an attribute of it fails.
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument);
  expect_contains(f.message, "line 1");
  expect_contains(f.message, "list object has no element 0");

  f = render_failure("ok\n{{ user.name }}");
  expect_contains(f.message, "line 2, column 4");
  expect_contains(f.message, "'user' is undefined");

  Dict d;
  d.set(Value::string("a"), Value::integer(1));
  f = render_failure("{{ d.b.c }}", {{"d", Value::dict(d)}});
  expect_contains(f.message, "'dict object' has no attribute 'b'");
}

TEST(RenderErrors, TypeErrorsReadLikePython) {
  expect_contains(render_failure("{{ 'a' + 1 }}").message, "can only concatenate str (not \"int\") to str");
  expect_contains(render_failure("{{ 1 < 'a' }}").message, "'<' not supported between instances of 'int' and 'str'");
  expect_contains(render_failure("{{ 1 / 0 }}").message, "division by zero");
  expect_contains(render_failure("{% for x in 3 %}{% endfor %}").message, "'int' object is not iterable");
  expect_contains(render_failure("{{ 3() }}").message, "'int' object is not callable");
  expect_contains(render_failure("{{ x|nosuch }}").message, "no filter named 'nosuch'");
  expect_contains(render_failure("{{ x is nosuch }}").message, "no test named 'nosuch'");
  expect_contains(render_failure("{{ 'a'.split('') }}").message, "empty separator");
  expect_contains(render_failure("{{ [1]|tojson(separators=1) }}").message, "not iterable");
}

TEST(RenderErrors, PositionIsTheInnermostFailingExpression) {
  Failure f = render_failure("{{ 'ok' ~ ('x' ~ (1 + 'b')) }}");
  expect_contains(f.message, "line 1, column 21");
}

TEST(RenderErrors, CallerIsInformedOfMacroFailures) {
  Failure f = render_failure("{% macro m(x) %}\n{{ x.y.z }}\n{% endmacro %}{{ m(none) }}");
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument);
  expect_contains(f.message, "line 2");
  expect_contains(f.message, "'None' has no attribute 'y'");
}

}  // namespace
}  // namespace hyllm::jinja
