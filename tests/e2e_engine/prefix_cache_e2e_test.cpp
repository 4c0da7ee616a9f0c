// Prefix caching over the real model on the CPU backend: a request served
// from the cache (KV blocks shared, GDN state restored from a snapshot)
// generates exactly the tokens and logprobs of the same request computed
// from scratch with the cache off. Exactness rests on the CPU kernels' batch
// invariance (cpu_kernels.h): a token's numbers do not depend on where its
// step starts.

#include <gtest/gtest.h>

#include "engine_e2e_util.h"
#include "util/log.h"

namespace hyllm::e2e {
namespace {

EngineConfig cold(EngineConfig c) {
  c.enable_prefix_caching = false;
  return c;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int32_t> tokens(std::mt19937& rng, int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab));
  return t;
}

EngineRequest greedy(std::string id, std::vector<int32_t> prompt, int max_tokens) {
  EngineRequest r;
  r.request_id = std::move(id);
  r.prompt_token_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = 1;
  r.sampling.max_tokens = max_tokens;
  return r;
}

// The requests one after another in a caching engine, and each alone in an
// engine with the cache off.
struct Compared {
  std::map<std::string, Choice> cached, cold;
};

Compared run_in_order(Engine& e, Engine& cold_engine, const std::vector<EngineRequest>& requests) {
  Compared out;
  for (const auto& r : requests) {
    for (auto& [k, c] : run_together(*e.core, {r})) out.cached[k] = std::move(c);
    for (auto& [k, c] : run_together(*cold_engine.core, {r})) out.cold[k] = std::move(c);
  }
  return out;
}

void expect_same(const Compared& c, const std::string& key) {
  ASSERT_TRUE(c.cached.count(key) && c.cold.count(key)) << key;
  EXPECT_EQ(c.cached.at(key).tokens, c.cold.at(key).tokens) << key;
  EXPECT_EQ(c.cached.at(key).logprobs, c.cold.at(key).logprobs) << key;
}

class PrefixCacheE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { spdlog::set_level(spdlog::level::warn); }
};

TEST_F(PrefixCacheE2E, HitsThatEndMidPromptAndAtThePromptsEndKeepTokensExact) {
  const EngineConfig config = exact_config();  // blocks of 16, steps of 8 tokens
  Engine e(config), off(cold(config));
  const int vocab = e.runner->vocab_size();
  std::mt19937 rng(11);
  const auto shared = tokens(rng, 40, vocab);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(greedy("mid" + std::to_string(i), concat(shared, tokens(rng, 9, vocab)), 12));
  // A prompt that ends on a block boundary, then one that extends it.
  const auto whole = tokens(rng, 48, vocab);
  reqs.push_back(greedy("end0", whole, 10));
  reqs.push_back(greedy("end1", concat(whole, tokens(rng, 5, vocab)), 10));
  const Compared c = run_in_order(e, off, reqs);
  for (const auto& r : reqs) expect_same(c, r.request_id + "#0");
  // mid0's chunks saved the state at 16 and 32: the others start at 32, in
  // the middle of their prompts. end1 starts where end0's prompt ended.
  EXPECT_EQ(c.cached.at("mid0#0").num_cached_tokens, 0);
  EXPECT_EQ(c.cached.at("mid1#0").num_cached_tokens, 32);
  EXPECT_EQ(c.cached.at("mid2#0").num_cached_tokens, 32);
  EXPECT_EQ(c.cached.at("end1#0").num_cached_tokens, 48);
}

// An unaligned prompt is prefilled in one step that also saves the state
// at its last block boundary (inside the step, StateSaveArgs); a later
// prompt that shares it up to a few tokens before its end hits that state
// and matches the cold run exactly, tokens and logprobs.
TEST_F(PrefixCacheE2E, AStateSavedInsideThePromptsStepIsHitExactly) {
  EngineConfig config = wide_config();  // blocks of 16, steps of 64 tokens
  Engine e(config), off(cold(config));
  const int vocab = e.runner->vocab_size();
  std::mt19937 rng(15);
  const auto first = tokens(rng, 37, vocab);
  const auto r0 = greedy("first", first, 1);
  const Compared c0 = run_in_order(e, off, {r0});
  expect_same(c0, "first#0");
  EXPECT_EQ(e.core->stats().num_steps, 1u) << "the whole prompt and its one token in one step";
  const auto r1 = greedy("next", concat(std::vector<int32_t>(first.begin(), first.begin() + 35), tokens(rng, 8, vocab)), 6);
  const Compared c1 = run_in_order(e, off, {r1});
  expect_same(c1, "next#0");
  EXPECT_EQ(c1.cached.at("next#0").num_cached_tokens, 32);
}

TEST_F(PrefixCacheE2E, AConversationResumesAtThePreviousTurnsLastComputedToken) {
  const EngineConfig config = exact_config();
  Engine e(config), off(cold(config));
  const int vocab = e.runner->vocab_size();
  std::mt19937 rng(12);
  auto history = tokens(rng, 21, vocab);
  int kept = 0;
  for (int turn = 0; turn < 3; ++turn) {
    const auto r = greedy("turn" + std::to_string(turn), history, 7);
    const Compared c = run_in_order(e, off, {r});
    expect_same(c, r.request_id + "#0");
    EXPECT_EQ(c.cached.at(r.request_id + "#0").num_cached_tokens, kept) << turn;
    const auto& out = c.cached.at(r.request_id + "#0").tokens;
    kept = static_cast<int>(history.size() + out.size()) - 1;
    history = concat(concat(history, out), tokens(rng, 6, vocab));
  }
}

TEST_F(PrefixCacheE2E, PreemptedAndEvictedPrefixesKeepTokensExact) {
  const EngineConfig config = exact_config();
  // 8 blocks (128 tokens) for 8 sequences of up to 84: constant preemption,
  // and cached blocks are evicted as soon as they are free.
  Engine tiny(config, 8);
  const int vocab = tiny.runner->vocab_size();
  std::mt19937 rng(13);
  const auto shared = tokens(rng, 33, vocab);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    auto prompt = i % 2 ? concat(shared, tokens(rng, 1 + i, vocab)) : tokens(rng, 10 + 3 * i, vocab);
    reqs.push_back(greedy("p" + std::to_string(i), std::move(prompt), 14 + i));
  }
  const auto together = run_together(*tiny.core, reqs);
  EXPECT_GT(tiny.core->stats().num_preemptions, 0u);
  // The same requests again: whatever survived eviction is hit.
  std::vector<EngineRequest> again = reqs;
  for (auto& r : again) r.request_id += "b";
  const auto second = run_together(*tiny.core, again);
  EXPECT_GT(tiny.core->stats().prefix_cache_hits, 0u);
  Engine off(cold(config));
  std::map<std::string, Choice> alone;
  for (const auto& r : reqs) {
    for (auto& [k, ch] : run_together(*off.core, {r})) alone[k] = std::move(ch);
  }
  for (const auto& r : reqs) {
    const std::string key = r.request_id + "#0";
    EXPECT_EQ(together.at(key).tokens, alone.at(key).tokens) << key;
    EXPECT_EQ(together.at(key).logprobs, alone.at(key).logprobs) << key;
    EXPECT_EQ(second.at(r.request_id + "b#0").tokens, alone.at(key).tokens) << key << " (again)";
  }
  EXPECT_EQ(tiny.core->scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(tiny.core->scheduler().slot_pool().num_used(), 0);
}

TEST_F(PrefixCacheE2E, SeededSamplingIsReproducibleWithAndWithoutHits) {
  const EngineConfig config = exact_config();
  Engine e(config), off(cold(config));
  const int vocab = e.runner->vocab_size();
  std::mt19937 rng(14);
  const auto shared = tokens(rng, 35, vocab);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    EngineRequest r = greedy("s" + std::to_string(i), concat(shared, tokens(rng, 4, vocab)), 10);
    r.sampling.temperature = 0.9f;
    r.sampling.top_p = 0.95f;
    r.sampling.top_k = 50;
    r.sampling.seed = 2024 + i;
    r.sampling.n = 2;
    reqs.push_back(std::move(r));
  }
  const Compared c = run_in_order(e, off, reqs);
  for (const auto& r : reqs) {
    expect_same(c, r.request_id + "#0");
    expect_same(c, r.request_id + "#1");
  }
  EXPECT_EQ(c.cached.at("s2#0").num_cached_tokens, 32);
}

}  // namespace
}  // namespace hyllm::e2e
