// Renders every committed chat template over every committed conversation and
// compares byte for byte with the goldens made by tools/templates/make_goldens.py
// (Python jinja2 configured as transformers does; @huggingface/jinja as a
// second opinion). Where jinja2 raised, the render must fail with
// kInvalidArgument.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "text/chat_template.h"
#include "util/status.h"

namespace hyllm {
namespace {

using nlohmann::ordered_json;

std::string data_path(const std::string& name) {
  return std::string(HYLLM_SOURCE_DIR) + "/tests/data/templates/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The instant make_goldens.py gives strftime_now: 2025-06-15 12:00:00 UTC.
constexpr int64_t kGoldenTime = 1749988800;

ordered_json read_json(const std::string& name) { return ordered_json::parse(read_file(data_path(name))); }

TEST(ChatTemplateConformance, MatchesJinja2Goldens) {
  ordered_json manifest = read_json("templates.json");
  ordered_json conversations = read_json("conversations.json");
  ordered_json goldens = read_json("goldens.json");

  std::map<std::string, ordered_json> cases;
  for (const auto& c : conversations) cases[c["name"].get<std::string>()] = c;
  std::map<std::string, std::pair<ChatTemplate, ordered_json>> templates;
  for (const auto& t : manifest) {
    std::string name = t["name"];
    ChatTemplateOptions options;
    options.fixed_time = kGoldenTime;
    templates.emplace(name, std::make_pair(ChatTemplate::from_source(read_file(data_path(t["file"])), options), t));
  }

  int compared = 0, expected_errors = 0;
  for (const auto& g : goldens) {
    std::string tname = g["template"], cname = g["case"];
    SCOPED_TRACE(tname + " / " + cname);
    auto it = templates.find(tname);
    ASSERT_NE(it, templates.end());
    const auto& [tmpl, entry] = it->second;
    const ordered_json& c = cases.at(cname);
    ChatTemplateInputs in;
    in.messages = c["messages"];
    if (c.contains("tools")) in.tools = c["tools"];
    if (c.contains("documents")) in.documents = c["documents"];
    in.add_generation_prompt = c.value("add_generation_prompt", true);
    if (c.contains("extra_context")) in.extra_context = c["extra_context"];
    in.bos_token = entry.value("bos_token", "");
    in.eos_token = entry.value("eos_token", "");
    if (g.contains("output")) {
      std::string got;
      try {
        got = tmpl.render(in);
      } catch (const Error& e) {
        ADD_FAILURE() << "render failed: " << e.what();
        continue;
      }
      EXPECT_EQ(got, g["output"].get<std::string>());
      ++compared;
    } else {
      try {
        tmpl.render(in);
        ADD_FAILURE() << "expected a failure like jinja2's: " << g["error"].get<std::string>();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      }
      ++expected_errors;
    }
  }
  EXPECT_GT(compared, 0);
  std::printf("compared %d renders, %d expected template errors\n", compared, expected_errors);
}

}  // namespace
}  // namespace hyllm
