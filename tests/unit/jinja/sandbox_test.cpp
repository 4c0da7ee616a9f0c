// Hostile templates: every sandbox cap fails the render with
// kResourceExhausted quickly, nothing crashes, hangs or leaks, and no builtin
// reaches files or the environment.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "text/jinja/template.h"
#include "util/status.h"

namespace hyllm::jinja {
namespace {

// Renders and returns the error code (kOk when it rendered).
ErrorCode render_code(const std::string& source, const TemplateOptions& options = {}, std::string* message = nullptr) {
  try {
    Template::parse(source, options).render({});
    return ErrorCode::kOk;
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
}

TemplateOptions small_limits() {
  TemplateOptions o;
  o.limits.max_steps = 200'000;
  o.limits.max_loop_iterations = 20'000;
  o.limits.max_depth = 200;
  o.limits.max_output_bytes = 1 << 20;
  return o;
}

class TimedTest : public ::testing::Test {
 protected:
  void SetUp() override { start_ = std::chrono::steady_clock::now(); }
  void TearDown() override {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start_);
    EXPECT_LT(ms.count(), 5000) << "a capped template must fail fast";
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

using Sandbox = TimedTest;

TEST_F(Sandbox, NestedLoopsHitTheIterationCap) {
  std::string msg;
  TemplateOptions o = small_limits();
  o.limits.max_steps = 10'000'000;
  EXPECT_EQ(render_code("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", o, &msg),
            ErrorCode::kResourceExhausted);
  EXPECT_NE(msg.find("loop iterations"), std::string::npos) << msg;
}

TEST_F(Sandbox, DefaultCapsStopLoopsToo) {
  // 10^10 iterations with the defaults: must stop at a cap, not run.
  EXPECT_EQ(render_code("{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}"),
            ErrorCode::kResourceExhausted);
}

TEST_F(Sandbox, StepCap) {
  TemplateOptions o = small_limits();
  o.limits.max_loop_iterations = 1'000'000;
  std::string msg;
  EXPECT_EQ(render_code("{% for i in range(100000) %}{{ i + i + i + i }}{% endfor %}", o, &msg),
            ErrorCode::kResourceExhausted);
  EXPECT_NE(msg.find("steps"), std::string::npos) << msg;
}

TEST_F(Sandbox, OutputCap) {
  std::string msg;
  EXPECT_EQ(render_code("{% for i in range(10000) %}{{ 'x' * 1000 }}{% endfor %}", small_limits(), &msg),
            ErrorCode::kResourceExhausted);
  EXPECT_NE(msg.find("bytes"), std::string::npos) << msg;
}

TEST_F(Sandbox, StringDoublingHitsTheSizeCap) {
  EXPECT_EQ(render_code("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                        "{{ ns.s|length }}",
                        small_limits()),
            ErrorCode::kResourceExhausted);
}

TEST_F(Sandbox, HugeRepetitionIsRefusedBeforeAllocating) {
  EXPECT_EQ(render_code("{{ 'x' * 1000000000000 }}"), ErrorCode::kResourceExhausted);
  EXPECT_EQ(render_code("{{ ([0] * 1000000000000)|length }}"), ErrorCode::kResourceExhausted);
  EXPECT_EQ(render_code("{{ range(1000000000000)|length }}"), ErrorCode::kResourceExhausted);
}

TEST_F(Sandbox, InfiniteMacroRecursion) {
  std::string msg;
  EXPECT_EQ(render_code("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", {}, &msg),
            ErrorCode::kResourceExhausted);
  EXPECT_NE(msg.find("nests deeper"), std::string::npos) << msg;
}

TEST_F(Sandbox, DeeplyNestedSourceIsRefusedAtParse) {
  std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  ErrorCode code = render_code("{{ " + parens + " }}");
  EXPECT_TRUE(code == ErrorCode::kResourceExhausted || code == ErrorCode::kCorruptData);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 5000; ++i) ifs += "{% endif %}";
  EXPECT_EQ(render_code(ifs), ErrorCode::kResourceExhausted);
  std::string nots;
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_EQ(render_code("{{ " + nots + "true }}"), ErrorCode::kResourceExhausted);
  // Long left-associative chains build deep trees too.
  std::string filters = "{{ 1";
  for (int i = 0; i < 100000; ++i) filters += "|abs";
  EXPECT_EQ(render_code(filters + " }}"), ErrorCode::kResourceExhausted);
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  EXPECT_EQ(render_code(sum + " }}"), ErrorCode::kResourceExhausted);
  std::string attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a";
  EXPECT_EQ(render_code(attrs + " }}"), ErrorCode::kResourceExhausted);
  // A realistic chain is fine.
  std::string concat = "{{ 'a'";
  for (int i = 0; i < 50; ++i) concat += " ~ 'b'";
  EXPECT_EQ(render_code(concat + " }}"), ErrorCode::kOk);
}

TEST_F(Sandbox, DeeplyNestedValuesAreCapped) {
  // Each iteration wraps the previous list: the depth cap stops it long
  // before printing, comparing or freeing it could exhaust the stack.
  std::string msg;
  EXPECT_EQ(render_code("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                        "{{ ns.x == ns.x }}",
                        {}, &msg),
            ErrorCode::kResourceExhausted);
  EXPECT_NE(msg.find("nests deeper"), std::string::npos) << msg;
}

TEST_F(Sandbox, SelfReferenceDoesNotRecurseForever) {
  // jinja2 allows a namespace to hold itself; printing it must fail cleanly.
  EXPECT_EQ(render_code("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), ErrorCode::kResourceExhausted);
  EXPECT_EQ(render_code("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me[0].me[0].me|length }}"),
            ErrorCode::kOk);
}

TEST_F(Sandbox, NamespaceChainsAreReleasedFlat) {
  // A chain 100k namespaces long: tearing it down must not recurse.
  EXPECT_EQ(render_code("{% set ns = namespace(cur=none) %}{% for i in range(100000) %}"
                        "{% set ns.cur = namespace(child=ns.cur) %}{% endfor %}done"),
            ErrorCode::kOk);
}

TEST_F(Sandbox, NoFileOrSystemAccess) {
  std::string msg;
  EXPECT_EQ(render_code("{% include '/etc/passwd' %}", {}, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("not supported"), std::string::npos) << msg;
  EXPECT_EQ(render_code("{% import 'x.j2' as x %}"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(render_code("{% from 'x.j2' import y %}"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(render_code("{% extends 'base.j2' %}"), ErrorCode::kInvalidArgument);
  // An include in a branch never taken does not break the template.
  EXPECT_EQ(render_code("{% if false %}{% include 'x' %}{% endif %}ok"), ErrorCode::kOk);
  // Python object internals are not reachable.
  Template t = Template::parse("[{{ ''.__class__ }}][{{ range.__globals__ }}][{{ dict.mro }}][{{ cycler }}][{{ lipsum }}]");
  EXPECT_EQ(t.render({}), "[][][][][]");
  EXPECT_EQ(render_code("{{ ''.__class__.__mro__ }}"), ErrorCode::kInvalidArgument);
}

TEST_F(Sandbox, ListsAndDictsAreImmutable) {
  std::string msg;
  EXPECT_EQ(render_code("{% set l = [1] %}{{ l.append(2) }}", {}, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("unsafe"), std::string::npos) << msg;
  EXPECT_EQ(render_code("{% set d = {} %}{{ d.update({'a': 1}) }}"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(render_code("{% set d = {'a': 1} %}{{ d.pop('a') }}"), ErrorCode::kInvalidArgument);
}

TEST_F(Sandbox, IntegerOverflowFailsInsteadOfWrapping) {
  EXPECT_EQ(render_code("{{ 9223372036854775807 + 1 }}"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(render_code("{{ 2 ** 64 }}"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(render_code("{{ -9223372036854775807 - 2 }}"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(render_code("{{ 99999999999999999999 }}"), ErrorCode::kCorruptData);
}

TEST_F(Sandbox, MalformedUtf8IsHandled) {
  Template t = Template::parse(std::string("a\xff\xfe{{ 'b\xc3' }}\xe2\x82"));
  std::string out = t.render({});
  EXPECT_EQ(out.substr(0, 1), "a");
  Template u = Template::parse("{{ s|length }}|{{ s[::-1]|length }}|{{ s|upper|length }}");
  Variables vars{{"s", Value::string(std::string("\xf0\x9f\x99", 3) + "x\xc0\xaf")}};
  EXPECT_NO_THROW(u.render(vars));
}

TEST_F(Sandbox, CapsAreConfigurable) {
  TemplateOptions o;
  o.limits.max_output_bytes = 10;
  EXPECT_EQ(render_code("{{ 'x' * 10 }}", o), ErrorCode::kOk);
  EXPECT_EQ(render_code("{{ 'x' * 11 }}", o), ErrorCode::kResourceExhausted);
  o = TemplateOptions{};
  o.limits.max_loop_iterations = 3;
  EXPECT_EQ(render_code("{% for i in range(3) %}{% endfor %}", o), ErrorCode::kOk);
  EXPECT_EQ(render_code("{% for i in range(4) %}{% endfor %}", o), ErrorCode::kResourceExhausted);
}

}  // namespace
}  // namespace hyllm::jinja
