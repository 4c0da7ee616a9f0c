// Prompt logprobs through the engine core: every prompt token after the first
// is scored once, in the request's first output, in chunks beside decoding
// sequences that it never holds back; scoring requests skip the prefix
// cache's lookup.

#include <gtest/gtest.h>

#include <random>

#include "engine_test_util.h"
#include "util/log.h"
#include "util/status.h"

namespace hyllm::testing {
namespace {

const bool quiet_logs = [] {
  spdlog::set_level(spdlog::level::warn);
  return true;
}();

// Checks one request's prompt logprobs against the fake executor's scoring.
void expect_scored(const std::vector<TokenLogprob>& scored, const std::vector<int32_t>& prompt, int vocab,
                   int num_top) {
  ASSERT_EQ(scored.size(), prompt.size() - 1);
  for (size_t p = 0; p + 1 < prompt.size(); ++p) {
    const TokenLogprob& t = scored[p];
    EXPECT_EQ(t.token, prompt[p + 1]) << "position " << p;
    EXPECT_FLOAT_EQ(t.logprob, -static_cast<float>(p + 1)) << "position " << p;
    const int32_t fav = FakeExecutor::favourite(std::vector<int32_t>(prompt.begin(), prompt.begin() + p + 1), vocab);
    EXPECT_EQ(t.rank, t.token == fav ? 1 : 2);
    ASSERT_EQ(t.top_logprobs.size(), num_top > 0 ? 1u : 0u);
    if (num_top > 0) {
      EXPECT_EQ(t.top_logprobs[0].first, fav);
    }
  }
}

TEST(PromptLogprobs, EveryPromptTokenIsScoredOnceAndDecodingSequencesAreNotHeldBack) {
  EngineConfig config = small_config();  // 32 tokens a step: the prompt comes in chunks
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(3);
  const EngineRequest a = make_request("a", random_prompt(rng, 5, 64), 12);
  const EngineRequest b = make_request("b", random_prompt(rng, 6, 64), 12);
  EngineRequest s = make_request("s", random_prompt(rng, 30, 64), 3);
  s.sampling.prompt_logprobs = 2;
  core.add_request(a);
  core.add_request(b);
  Results res;
  for (const RequestOutput& out : core.step()) res.add(out, 1);  // a and b prefill, then decode while s scores
  core.add_request(s);

  std::map<std::string, std::vector<int>> token_steps;
  int with_prompt_logprobs = 0;
  for (int step = 0; core.has_unfinished_requests(); ++step) {
    for (const RequestOutput& out : core.step()) {
      res.add(out, 1);
      if (!out.outputs.empty() && !out.outputs[0].new_token_ids.empty()) token_steps[out.request_id].push_back(step);
      if (out.request_id != "s") {
        EXPECT_TRUE(out.prompt_logprobs.empty());
        continue;
      }
      if (out.prompt_logprobs.empty()) continue;
      with_prompt_logprobs++;
      ASSERT_FALSE(out.outputs.empty());
      EXPECT_EQ(out.outputs[0].new_token_ids.size(), 1u) << "they come with the first token";
      expect_scored(out.prompt_logprobs, s.prompt_token_ids, 64, 2);
    }
  }
  EXPECT_EQ(with_prompt_logprobs, 1);
  // s takes two steps, and a and b get a token in every one.
  for (const char* id : {"a", "b"}) {
    const std::vector<int>& steps = token_steps.at(id);
    EXPECT_EQ(steps.back() - steps.front() + 1, static_cast<int>(steps.size())) << id << " skipped a step";
  }
  // Scoring changes no generated token.
  for (const EngineRequest* r : std::vector<const EngineRequest*>{&a, &b, &s}) {
    EXPECT_EQ(res.by_request.at(r->request_id)[0].tokens, solo(*r, config)[0].tokens) << r->request_id;
  }
}

TEST(PromptLogprobs, ARequestThatScoresItsPromptSkipsThePrefixCache) {
  EngineConfig config = small_config();
  config.enable_prefix_caching = true;
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(4);
  const std::vector<int32_t> prompt = random_prompt(rng, 21, 64);
  auto run = [&](const std::string& id, std::optional<int> prompt_logprobs) {
    EngineRequest r = make_request(id, prompt, 2);
    r.sampling.prompt_logprobs = prompt_logprobs;
    core.add_request(r);
    std::vector<RequestOutput> outs;
    while (core.has_unfinished_requests()) {
      for (RequestOutput& o : core.step()) outs.push_back(std::move(o));
    }
    return outs;
  };
  run("warm", std::nullopt);
  const auto scored = run("scored", 0);
  EXPECT_EQ(scored.front().num_cached_tokens, 0);
  expect_scored(scored.front().prompt_logprobs, prompt, 64, 0);
  const auto hit = run("hit", std::nullopt);
  EXPECT_GT(hit.front().num_cached_tokens, 0);
  EXPECT_TRUE(hit.front().prompt_logprobs.empty());
}

TEST(PromptLogprobs, NChoicesGetThemOnceAndAOneTokenPromptHasNone) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(5);
  EngineRequest r = make_request("n3", random_prompt(rng, 10, 64), 4, 3);
  r.sampling.prompt_logprobs = 1;
  r.sampling.temperature = 1.0f;
  EngineRequest one = make_request("one", {7}, 2);
  one.sampling.prompt_logprobs = 1;
  core.add_request(r);
  core.add_request(one);
  int sent = 0;
  Results res;
  while (core.has_unfinished_requests()) {
    for (const RequestOutput& out : core.step()) {
      res.add(out, out.request_id == "n3" ? 3 : 1);
      if (out.prompt_logprobs.empty()) continue;
      ASSERT_EQ(out.request_id, "n3");
      expect_scored(out.prompt_logprobs, r.prompt_token_ids, 64, 1);
      sent++;
    }
  }
  EXPECT_EQ(sent, 1);
  for (const ChoiceResult& c : res.by_request.at("n3")) EXPECT_EQ(c.tokens.size(), 4u);
  EXPECT_EQ(res.by_request.at("one")[0].tokens.size(), 2u);
}

TEST(PromptLogprobs, AreBoundedByMaxLogprobs) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  EngineRequest r = make_request("x", {1, 2, 3}, 2);
  r.sampling.prompt_logprobs = config.max_logprobs;
  EXPECT_NO_THROW(core.validate(r));
  r.sampling.prompt_logprobs = config.max_logprobs + 1;
  try {
    core.validate(r);
    FAIL() << "prompt_logprobs above max_logprobs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Requested prompt logprobs of"), std::string::npos) << e.what();
  }
  r.sampling.prompt_logprobs = -1;
  EXPECT_THROW(core.validate(r), Error);
}

}  // namespace
}  // namespace hyllm::testing
