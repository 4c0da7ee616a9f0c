// The prefix-cache workloads of `hyllm bench serve`: prefix_repetition
// (vLLM's dataset) and multi_turn conversations.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "bench/multi_turn.h"
#include "bench/prefix_repetition_dataset.h"
#include "bench/tokenizer_adapter.h"
#include "util/status.h"

namespace hyllm::bench {
namespace {

const ModelDirTokenizer& tokenizer() {
  static const ModelDirTokenizer tok(std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny");
  return tok;
}

TEST(PrefixRepetition, PromptsShareTheirPrefixTextInGroups) {
  PrefixRepetitionOptions o;
  o.num_prompts = 13;  // 4 per prefix, as vLLM counts
  o.num_prefixes = 3;
  o.prefix_len = 40;
  o.suffix_len = 12;
  o.output_len = 7;
  const auto reqs = make_prefix_repetition_dataset(tokenizer(), o);
  ASSERT_EQ(reqs.size(), 12u);
  std::map<std::string, int> groups;
  for (const auto& r : reqs) {
    EXPECT_EQ(r.prompt_len, 52);
    EXPECT_EQ(r.expected_output_len, 7);
    const auto ids = tokenizer().encode(r.prompt);
    ASSERT_GE(ids.size(), 32u);
    groups[tokenizer().decode(std::vector<int32_t>(ids.begin(), ids.begin() + 32))]++;
  }
  ASSERT_EQ(groups.size(), 3u);
  for (const auto& [text, n] : groups) EXPECT_EQ(n, 4);
  EXPECT_EQ(make_prefix_repetition_dataset(tokenizer(), o)[5].prompt, reqs[5].prompt) << "seeded";
  o.num_prompts = 2;
  EXPECT_THROW(make_prefix_repetition_dataset(tokenizer(), o), Error);
}

TEST(MultiTurn, EachTurnRepeatsTheConversationSoFar) {
  MultiTurnOptions o;
  o.num_conversations = 2;
  o.num_turns = 3;
  o.prefix_len = 10;
  o.input_len = 6;
  o.output_len = 5;
  const auto convs = make_multi_turn_conversations(tokenizer(), o);
  ASSERT_EQ(convs.size(), 2u);
  EXPECT_EQ(convs[0].system, convs[1].system) << "a shared system prompt";
  EXPECT_NE(convs[0].user_messages[0], convs[1].user_messages[0]);
  RequestInput base;
  base.model = "m";
  const std::vector<std::string> answers = {"first answer", "second answer"};
  const RequestInput third = multi_turn_request(base, EndpointKind::kCompletions, convs[0], 2, answers);
  const auto& c = convs[0];
  EXPECT_EQ(third.prompt, c.system + "\n\n" + c.user_messages[0] + "\n\nfirst answer\n\n" + c.user_messages[1] +
                              "\n\nsecond answer\n\n" + c.user_messages[2]);
  EXPECT_EQ(third.max_tokens, 5);
  const RequestInput chat = multi_turn_request(base, EndpointKind::kChat, c, 1, answers);
  const auto& m = chat.extra_body.at("messages");
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "first answer");
  EXPECT_EQ(m[3]["content"], c.user_messages[1]);
}

TEST(MultiTurn, TurnsRunInOrderConversationsSideBySideAndAFailureEndsItsConversation) {
  MultiTurnOptions o;
  o.num_conversations = 6;
  o.num_turns = 3;
  o.input_len = 4;
  o.output_len = 2;
  const auto convs = make_multi_turn_conversations(tokenizer(), o);
  std::mutex mu;
  std::map<std::string, int> conversation_of;  // user message -> conversation
  for (size_t i = 0; i < convs.size(); ++i)
    for (const auto& u : convs[i].user_messages) conversation_of[u] = static_cast<int>(i);
  std::map<int, std::vector<std::string>> prompts;  // per conversation, in the order sent
  std::atomic<int> in_flight{0}, peak{0};
  RequestInput base;
  LoadRun run = run_multi_turn(convs, base, EndpointKind::kCompletions, 2, [&](const RequestInput& in) {
    const int now = ++in_flight;
    for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    --in_flight;
    std::lock_guard lock(mu);
    int conv = -1;  // the conversation whose user message ends the prompt
    for (const auto& [message, c] : conversation_of) {
      if (in.prompt.size() >= message.size() &&
          in.prompt.compare(in.prompt.size() - message.size(), message.size(), message) == 0)
        conv = c;
    }
    prompts[conv].push_back(in.prompt);
    const int turn = static_cast<int>(prompts[conv].size()) - 1;
    RequestResult r;
    r.success = !(conv == 4 && turn == 1);
    r.generated_text = "answer " + std::to_string(conv) + "." + std::to_string(turn);
    return r;
  });
  EXPECT_LE(peak.load(), 2);
  ASSERT_EQ(run.results.size(), 18u);
  EXPECT_EQ(prompts[4].size(), 2u) << "conversation 4's third turn is never sent";
  for (int i = 0; i < 6; ++i) {
    for (int t = 0; t < 3; ++t) {
      const RequestResult& r = run.results[static_cast<size_t>(i * 3 + t)];
      EXPECT_EQ(r.success, i != 4 || t == 0) << i << "." << t;
      if (i == 4 || t == 0) continue;
      ASSERT_EQ(prompts[i].size(), 3u);
      EXPECT_NE(prompts[i][static_cast<size_t>(t)].find("answer " + std::to_string(i) + "." + std::to_string(t - 1)),
                std::string::npos) << "turn " << t << " repeats the answer before it";
    }
  }
  EXPECT_NE(run.results[4 * 3 + 2].error.find("earlier turn"), std::string::npos);
}

}  // namespace
}  // namespace hyllm::bench
