// Rendering cost stays linear in the conversation: a long multi-turn chat
// with tool calls renders through the Qwen3.5 template well within budget.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "text/chat_template.h"

namespace hyllm {
namespace {

using nlohmann::ordered_json;

TEST(ChatTemplatePerformance, LongConversation) {
  std::ifstream in(std::string(HYLLM_SOURCE_DIR) + "/tests/data/templates/qwen3_5.jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = ChatTemplate::from_source(ss.str());
  ChatTemplateInputs inputs;
  std::string chunk(4000, 'x');
  for (int i = 0; i < 250; ++i) {
    inputs.messages.push_back({{"role", "user"}, {"content", "question " + std::to_string(i) + chunk}});
    ordered_json call = {{"id", "c"}, {"type", "function"},
                         {"function", {{"name", "f"}, {"arguments", {{"q", chunk}, {"n", i}}}}}};
    inputs.messages.push_back({{"role", "assistant"}, {"content", "<think>\nhmm\n</think>\n\nanswer" + chunk},
                               {"tool_calls", ordered_json::array({call})}});
    inputs.messages.push_back({{"role", "tool"}, {"content", "result " + chunk}});
  }
  auto start = std::chrono::steady_clock::now();
  std::string prompt = t.render(inputs);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(prompt.size(), 250u * 4 * 4000);
  std::printf("rendered %zu bytes from 750 messages in %.1f ms\n", prompt.size(), ms);
  EXPECT_LT(ms, 3000.0);
}

}  // namespace
}  // namespace hyllm
