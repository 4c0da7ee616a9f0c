// The engine over the real model runner on the CPU backend, with a tiny
// Qwen3.5 checkpoint (bf16): batching, chunking and preemption must not change
// what a request generates.
//
// Exactness rests on the CPU kernels' batch invariance (cpu_kernels.h): a
// token's numbers do not depend on what else shares its step or on whether it
// arrives in a prefill chunk, a decode step or a recompute, so greedy tokens
// must match their solo runs exactly, with small and with wide steps.

#include <gtest/gtest.h>

#include "engine_e2e_util.h"
#include "util/log.h"

namespace hyllm::e2e {
namespace {

class EngineE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { spdlog::set_level(spdlog::level::warn); }
};

// 32 random greedy requests (from `seed`) give each its solo run's tokens
// when they run together, and again when a cache of 8 sequences' worth
// preempts them; every block and state slot is free afterwards.
void expect_together_and_preempted_equal_alone(const EngineConfig& config, uint32_t seed) {
  Engine e(config);
  const auto requests = random_requests(32, seed, e.runner->vocab_size(), config.max_model_len);
  const auto alone = run_alone(config, requests);
  const auto together = run_together(*e.core, requests);
  Engine tiny(config, 8);
  const auto preempted = run_together(*tiny.core, requests);
  EXPECT_GT(tiny.core->stats().num_preemptions, 0u);
  for (const auto& r : requests) {
    const std::string key = r.request_id + "#0";
    ASSERT_EQ(alone.at(key).tokens.size(), static_cast<size_t>(r.sampling.max_tokens));
    EXPECT_EQ(together.at(key).tokens, alone.at(key).tokens) << r.request_id;
    EXPECT_EQ(preempted.at(key).tokens, alone.at(key).tokens) << r.request_id << " (preempted)";
  }
  EXPECT_EQ(tiny.core->scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(tiny.core->scheduler().slot_pool().num_used(), 0);
}

TEST_F(EngineE2E, BatchingChunkingAndPreemptionKeepGreedyTokensExact) {
  // exact_config: 128 tokens of KV for 8 running sequences of up to 84.
  expect_together_and_preempted_equal_alone(exact_config(), 1);
}

TEST_F(EngineE2E, ThirtyTwoRunningAtOnceMatchTheirSoloRunsExactly) {
  expect_together_and_preempted_equal_alone(wide_config(), 2);
}

TEST_F(EngineE2E, SeededSamplingIsReproducibleWhateverElseRuns) {
  Engine e(exact_config());
  const int vocab = e.runner->vocab_size();
  EngineRequest seeded;
  seeded.request_id = "seeded";
  seeded.prompt_token_ids = {3, 14, 15, 92, 65, 35};
  seeded.sampling.temperature = 0.9f;
  seeded.sampling.top_p = 0.95f;
  seeded.sampling.top_k = 50;
  seeded.sampling.seed = 2024;
  seeded.sampling.max_tokens = 20;
  seeded.sampling.ignore_eos = true;
  seeded.sampling.n = 2;
  const auto alone = run_together(*e.core, {seeded});

  auto crowd = random_requests(12, 3, vocab, exact_config().max_model_len);
  for (auto& r : crowd) r.sampling.temperature = 1.0f;  // unseeded neighbours
  crowd.push_back(seeded);
  const auto with_crowd = run_together(*e.core, crowd);
  Engine tiny(exact_config(), 8);  // and under preemption
  const auto preempted = run_together(*tiny.core, crowd);
  EXPECT_GT(tiny.core->stats().num_preemptions, 0u);
  for (const char* key : {"seeded#0", "seeded#1"}) {
    ASSERT_EQ(alone.at(key).tokens.size(), 20u);
    EXPECT_EQ(with_crowd.at(key).tokens, alone.at(key).tokens) << key;
    EXPECT_EQ(preempted.at(key).tokens, alone.at(key).tokens) << key;
  }
  EXPECT_NE(alone.at("seeded#0").tokens, alone.at("seeded#1").tokens) << "choices use different seeds";
}

}  // namespace
}  // namespace hyllm::e2e
