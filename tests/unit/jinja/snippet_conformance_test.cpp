// One feature per template (expressions, filters, tests, statements,
// whitespace control, errors), compared byte for byte with Python jinja2 under
// transformers' settings (tools/templates/snippets.py, make_goldens.py).

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "text/jinja/template.h"
#include "util/status.h"

namespace hyllm::jinja {
namespace {

using nlohmann::ordered_json;

constexpr int64_t kGoldenTime = 1749988800;  // make_goldens.py's strftime_now instant

ordered_json load_snippets() {
  std::ifstream in(std::string(HYLLM_SOURCE_DIR) + "/tests/data/templates/snippet_goldens.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

TEST(SnippetConformance, MatchesJinja2) {
  ordered_json snippets = load_snippets();
  ASSERT_GT(snippets.size(), 50u);
  TemplateOptions options;
  options.fixed_time = kGoldenTime;
  int outputs = 0, errors = 0, syntax_errors = 0;
  for (const auto& s : snippets) {
    std::string name = s["name"];
    SCOPED_TRACE(name + ": " + s["template"].get<std::string>());
    Variables vars;
    for (const auto& [k, v] : s["context"].items()) vars.emplace_back(k, value_from_json(v));
    if (s.contains("syntax_error")) {
      try {
        Template::parse(s["template"].get<std::string>(), options);
        ADD_FAILURE() << "expected a syntax error like jinja2's: " << s["syntax_error"].get<std::string>();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << e.what();
        EXPECT_NE(std::string(e.what()).find("line 1, column"), std::string::npos) << e.what();
      }
      ++syntax_errors;
      continue;
    }
    if (s.contains("output")) {
      try {
        Template t = Template::parse(s["template"].get<std::string>(), options);
        EXPECT_EQ(t.render(vars), s["output"].get<std::string>());
      } catch (const Error& e) {
        ADD_FAILURE() << "failed: " << e.what();
      }
      ++outputs;
      continue;
    }
    // jinja2 failed (at compile or render time): so must we, with a clear code.
    try {
      Template t = Template::parse(s["template"].get<std::string>(), options);
      std::string out = t.render(vars);
      ADD_FAILURE() << "expected a failure like jinja2's: " << s["error"].get<std::string>() << ", got: " << out;
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::kInvalidArgument || e.code() == ErrorCode::kResourceExhausted ||
                  e.code() == ErrorCode::kCorruptData)
          << e.what();
    }
    ++errors;
  }
  std::printf("snippets: %d outputs, %d render errors, %d syntax errors\n", outputs, errors, syntax_errors);
}

}  // namespace
}  // namespace hyllm::jinja
