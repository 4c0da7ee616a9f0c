// Prompt logprobs in the runner (executor.h, SeqWork::score_ids): each scored
// position's logprob, rank and top entries equal what the logits of a step
// that ends at that position give, whether the prompt comes in one chunk or
// two, beside another sequence's sampled row, with more positions than the
// sampled-row capacity (scored in passes), and with a device sampler (every
// pass reaches it, as scoring rows, unless a position asks for more top
// entries than it returns: then the host scores them).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_sampler.h"
#include "engine/logprobs.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "runner_test_util.h"

namespace hyllm {
namespace {

const std::vector<int32_t> kPrompt{5, 17, 42, 9, 300, 11, 71, 8, 1000, 23, 2, 64};

struct Runner {
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::unique_ptr<ModelRunner> runner;
  explicit Runner(std::shared_ptr<DeviceSampler> sampler = nullptr) {
    RunnerOptions ro = test::small_runner_options();  // 8 logit rows: 11 positions take two passes
    ro.device_sampler = std::move(sampler);
    runner = std::make_unique<ModelRunner>(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
    const CacheLayout layout = runner->cache_layout();
    runner->allocate_cache({.block_size = 16,
                            .num_blocks = 4 + layout.reserved_blocks,
                            .num_state_slots = 2 + layout.reserved_state_slots});
  }
};

SeqWork chunk(const std::vector<int32_t>& tokens, int start, int n, int32_t slot, std::span<const int32_t> table) {
  SeqWork w;
  w.seq_id = slot;
  w.token_ids = std::span<const int32_t>(tokens).subspan(static_cast<size_t>(start), static_cast<size_t>(n));
  w.start_pos = start;
  w.block_table = table;
  w.state_slot = slot;
  return w;
}

// The reference: a step that ends at position p samples its row; the
// host sampler's runner keeps that row's logits.
std::vector<TokenLogprob> reference(int num_top) {
  std::vector<TokenLogprob> expected;
  std::vector<double> logprobs;
  std::vector<int32_t> order;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> table{0};
  for (size_t p = 0; p + 1 < kPrompt.size(); ++p) {
    Runner r;
    SeqWork w = chunk(kPrompt, 0, static_cast<int>(p) + 1, 0, table);
    w.sample = true;
    w.sampling = &greedy;
    w.prompt_ids = w.token_ids;
    r.runner->execute({.seqs = {w}});
    expected.push_back(score_token(r.runner->last_logits(), kPrompt[p + 1], num_top, logprobs, order));
  }
  return expected;
}

void expect_near(const std::vector<TokenLogprob>& got, const std::vector<TokenLogprob>& want, size_t first) {
  for (size_t j = 0; j < got.size(); ++j) {
    const TokenLogprob& a = got[j];
    const TokenLogprob& b = want[first + j];
    EXPECT_EQ(a.token, b.token) << "position " << first + j;
    EXPECT_NEAR(a.logprob, b.logprob, 1e-3) << "position " << first + j;
    EXPECT_EQ(a.rank, b.rank) << "position " << first + j;
    ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size());
    for (size_t k = 0; k < a.top_logprobs.size(); ++k) {
      EXPECT_EQ(a.top_logprobs[k].first, b.top_logprobs[k].first) << "position " << first + j << " entry " << k;
      EXPECT_NEAR(a.top_logprobs[k].second, b.top_logprobs[k].second, 1e-3);
    }
  }
}

TEST(PromptScoring, EveryPositionMatchesTheLogitsOfAStepEndingThere) {
  const std::vector<TokenLogprob> want = reference(3);
  const std::vector<int32_t> table{0}, other_table{1};
  const auto P = static_cast<int>(kPrompt.size());
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  auto scored_chunk = [&](int start, int n, bool sample) {
    SeqWork w = chunk(kPrompt, start, n, 0, table);
    w.score_ids = std::span<const int32_t>(kPrompt).subspan(static_cast<size_t>(start) + 1,
                                                           static_cast<size_t>(std::min(n, P - 1 - start)));
    w.num_prompt_logprobs = 3;
    w.sample = sample;
    if (sample) {
      w.sampling = &greedy;
      w.prompt_ids = kPrompt;
    }
    return w;
  };
  for (const bool device : {false, true}) {
    SCOPED_TRACE(device ? "device sampler" : "host sampler");
    auto sampler = std::make_shared<test::GreedyDeviceSampler>();
    // One chunk, beside another sequence that samples.
    {
      Runner r(device ? sampler : nullptr);
      SeqWork other = chunk(kPrompt, 0, 4, 1, other_table);
      other.sample = true;
      other.sampling = &greedy;
      other.prompt_ids = other.token_ids;
      StepOutput out = r.runner->execute({.seqs = {scored_chunk(0, P, true), other}});
      ASSERT_EQ(out.sampled.size(), 2u);
      ASSERT_EQ(out.scored.size(), 1u);
      ASSERT_EQ(out.scored[0].size(), kPrompt.size() - 1);
      expect_near(out.scored[0], want, 0);
      if (device) {
        EXPECT_EQ(sampler->logit_rows, (std::vector<int64_t>{2, 8, 3})) << "the sampled rows, then two passes";
      }
    }
    // Two chunks: the first scores all its positions, the second all but its last.
    {
      Runner r(device ? sampler : nullptr);
      StepOutput first = r.runner->execute({.seqs = {scored_chunk(0, 5, false)}});
      EXPECT_TRUE(first.sampled.empty());
      ASSERT_EQ(first.scored.size(), 1u);
      ASSERT_EQ(first.scored[0].size(), 5u);
      expect_near(first.scored[0], want, 0);
      StepOutput second = r.runner->execute({.seqs = {scored_chunk(5, P - 5, true)}});
      ASSERT_EQ(second.sampled.size(), 1u);
      ASSERT_EQ(second.scored.size(), 1u);
      ASSERT_EQ(second.scored[0].size(), kPrompt.size() - 6);
      expect_near(second.scored[0], want, 5);
    }
  }
}

TEST(PromptScoring, MoreTopEntriesThanTheDeviceSamplerReturnsAreScoredOnTheHost) {
  const std::vector<int32_t> table{0};
  auto sampler = std::make_shared<test::GreedyDeviceSampler>();
  Runner r(sampler);
  SeqWork w = chunk(kPrompt, 0, 5, 0, table);
  w.score_ids = std::span<const int32_t>(kPrompt).subspan(1, 5);
  w.num_prompt_logprobs = kMaxDeviceTopLogprobs + 1;
  StepOutput out = r.runner->execute({.seqs = {w}});
  EXPECT_EQ(sampler->calls, 0);
  ASSERT_EQ(out.scored.size(), 1u);
  ASSERT_EQ(out.scored[0].size(), 5u);
  const std::vector<TokenLogprob> want = reference(kMaxDeviceTopLogprobs + 1);
  expect_near(out.scored[0], want, 0);
}

TEST(PromptScoring, AStepScoresAllItsTokensInPasses) {
  Runner r;  // 8 logit rows
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(static_cast<int32_t>(7 + 13 * i));
  const std::vector<int32_t> table{0, 1, 2};
  SeqWork w = chunk(tokens, 0, 40, 0, table);
  w.score_ids = std::span<const int32_t>(tokens).subspan(1, 39);
  w.num_prompt_logprobs = 1;
  StepOutput out = r.runner->execute({.seqs = {w}});
  ASSERT_EQ(out.scored.size(), 1u);
  ASSERT_EQ(out.scored[0].size(), 39u);
  for (size_t j = 0; j < 39; ++j) {
    const TokenLogprob& t = out.scored[0][j];
    EXPECT_EQ(t.token, tokens[j + 1]);
    EXPECT_TRUE(std::isfinite(t.logprob) && t.logprob <= 0.0f) << j;
    EXPECT_GE(t.rank, 1);
    ASSERT_EQ(t.top_logprobs.size(), 1u);
    EXPECT_GE(t.top_logprobs[0].second, t.logprob);
  }
}

}  // namespace
}  // namespace hyllm
