// Speculative decoding, GPU-free: --speculative-config parsing, draft
// acceptance (and why it keeps the sampling distribution), and the
// scheduler's budgeting of draft tokens and lookahead blocks.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/spec_decode.h"
#include "engine/speculative_config.h"
#include "util/status.h"

namespace hyllm {
namespace {

ErrorCode parse_error(std::string_view text) {
  try {
    parse_speculative_config(text);
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kOk;
}

TEST(SpeculativeConfig, TakesVllmsMtpKeysAndRefusesTheRest) {
  EXPECT_EQ(parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 2})").num_speculative_tokens, 2);
  EXPECT_EQ(parse_speculative_config(R"({"method":"qwen3_next_mtp","num_speculative_tokens":4})").num_speculative_tokens,
            4);
  for (const char* bad : {"", "[]", "{", R"({"num_speculative_tokens": 2})", R"({"method": "mtp"})",
                          R"({"method": "eagle", "num_speculative_tokens": 2})",
                          R"({"method": "mtp", "num_speculative_tokens": 0})",
                          R"({"method": "mtp", "num_speculative_tokens": 5})",
                          R"({"method": "mtp", "num_speculative_tokens": 1.5})",
                          R"({"method": "mtp", "num_speculative_tokens": 2, "model": "x"})"}) {
    EXPECT_EQ(parse_error(bad), ErrorCode::kInvalidArgument) << bad;
  }
  try {
    parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2})");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ngram"), std::string::npos) << e.what();
  }
}

TEST(DraftAcceptance, AcceptsTheLeadingDraftsTheTargetAgreesWith) {
  EXPECT_EQ(count_accepted_drafts(std::vector<int32_t>{}, std::vector<int32_t>{5}), 0);
  EXPECT_EQ(count_accepted_drafts(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 2, 3, 4}), 3);
  EXPECT_EQ(count_accepted_drafts(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 9, 3, 4}), 1);
  EXPECT_EQ(count_accepted_drafts(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{7, 2, 3, 4}), 0);
  EXPECT_THROW(count_accepted_drafts(std::vector<int32_t>{1}, std::vector<int32_t>{1}), Error);
}

// Sampling x ~ p and accepting a point-mass draft d iff x == d is rejection
// sampling: the emitted token follows p, and d is accepted with probability
// p(d). Checked with the engine's sampler over many seeds.
TEST(DraftAcceptance, EmittedTokensFollowTheTargetDistribution) {
  const std::vector<float> logits{1.0f, 2.0f, 0.5f, 1.5f, -1.0f};
  std::vector<double> p(logits.size());
  double z = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) z += p[i] = std::exp(logits[i]);
  for (double& x : p) x /= z;
  SamplingParams params;
  params.temperature = 1.0f;
  Sampler sampler;
  const int32_t draft = 3;
  const int n = 40000;
  std::vector<int> emitted(logits.size(), 0);
  int accepted = 0;
  for (int i = 0; i < n; ++i) {
    SeqWork w;
    w.sample = true;
    w.sampling = &params;
    w.seed = 1000 + static_cast<uint64_t>(i);
    const int32_t target = sampler.sample(logits, w).token;
    const int32_t drafts[] = {draft};
    const int32_t targets[] = {target, -1};
    const int a = count_accepted_drafts(drafts, targets);
    accepted += a;
    emitted[static_cast<size_t>(target)]++;  // the first emitted token, accepted or the correction
  }
  // Binomial standard errors are below 0.0025 here; allow 5 of them.
  EXPECT_NEAR(static_cast<double>(accepted) / n, p[draft], 0.0125);
  for (size_t t = 0; t < p.size(); ++t) EXPECT_NEAR(static_cast<double>(emitted[t]) / n, p[t], 0.0125) << t;
}

// A scheduler over one request; the test plays the engine (commit, append).
struct SchedulerHarness {
  EngineConfig config;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<std::unique_ptr<Request>> requests;

  SchedulerHarness(int budget, int k, int max_model_len = 64) {
    config.max_num_seqs = 4;
    config.max_num_batched_tokens = budget;
    config.max_model_len = max_model_len;
    config.block_size = 4;
    config.num_speculative_tokens = k;
    config.enable_prefix_caching = false;
    scheduler = std::make_unique<Scheduler>(config, 64, 8);
  }
  Sequence& add(int prompt_len) {
    auto req = std::make_unique<Request>();
    req->id = "r" + std::to_string(requests.size());
    req->sampling.max_tokens = 100;
    auto seq = std::make_unique<Sequence>();
    seq->request = req.get();
    for (int i = 0; i < prompt_len; ++i) seq->tokens.push_back(i);
    seq->num_prompt_tokens = prompt_len;
    Sequence& s = *seq;
    req->seqs.push_back(std::move(seq));
    scheduler->add_request(*req);
    requests.push_back(std::move(req));
    return s;
  }
};

TEST(SpecScheduling, DraftsRideWithTheLastTokenWithinTheBudgetAndGetLookaheadBlocks) {
  SchedulerHarness h(/*budget=*/8, /*k=*/3);
  Sequence& a = h.add(5);
  SchedulerOutput out = h.scheduler->schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_TRUE(out.chunks[0].sample);
  EXPECT_EQ(out.chunks[0].num_drafts, 0);
  EXPECT_EQ(a.block_table.size(), 2u) << "5 tokens + 3 lookahead positions";
  h.scheduler->commit(out);
  a.tokens.push_back(42);  // the sampled token
  a.draft_tokens = {7, 8, 9};

  Sequence& b = h.add(3);  // admitted with the budget left
  out = h.scheduler->schedule();
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].seq, &a);
  EXPECT_EQ(out.chunks[0].start_pos, 5);
  EXPECT_EQ(out.chunks[0].num_tokens, 4);
  EXPECT_EQ(out.chunks[0].num_drafts, 3);
  EXPECT_TRUE(out.chunks[0].sample);
  EXPECT_EQ(a.block_table.size(), 3u) << "positions up to 5 + 4 + 3";
  EXPECT_EQ(out.chunks[1].seq, &b);
  EXPECT_EQ(out.chunks[1].num_tokens, 3);
  EXPECT_EQ(out.num_scheduled_tokens, 7);
  // The engine: 1 draft accepted, so 2 tokens computed.
  out.chunks[0].num_tokens = 2;
  a.tokens.push_back(7);
  h.scheduler->commit(out);
  EXPECT_EQ(a.num_computed_tokens, 7);
  a.tokens.push_back(11);  // the correction token
  b.tokens.push_back(12);
  a.draft_tokens = {1, 2, 3};
  b.draft_tokens = {4, 5, 6};

  // Budget 8: a takes 1 + 3, b the 4 left: 1 + 3.
  out = h.scheduler->schedule();
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].num_drafts, 3);
  EXPECT_EQ(out.chunks[1].num_drafts, 3);
  EXPECT_EQ(out.num_scheduled_tokens, 8);
}

TEST(SpecScheduling, ShortBudgetsAndMaxModelLenCutTheDrafts) {
  SchedulerHarness h(/*budget=*/6, /*k=*/4, /*max_model_len=*/12);
  Sequence& a = h.add(4);
  Sequence& b = h.add(2);
  SchedulerOutput out = h.scheduler->schedule();
  ASSERT_EQ(out.chunks.size(), 2u);
  h.scheduler->commit(out);
  a.tokens.push_back(1);
  b.tokens.push_back(2);
  a.draft_tokens = {1, 2, 3, 4};
  b.draft_tokens = {5, 6, 7, 8};
  out = h.scheduler->schedule();
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].num_drafts, 4);  // 5 of the 6 tokens
  EXPECT_EQ(out.chunks[1].num_drafts, 0);  // 1 token left: no room for drafts
  EXPECT_EQ(out.chunks[1].num_tokens, 1);
  EXPECT_TRUE(b.draft_tokens.empty());
  out.chunks[0].num_tokens = 5;  // all accepted
  for (int t : {1, 2, 3, 4}) a.tokens.push_back(t);
  h.scheduler->commit(out);
  a.tokens.push_back(9);  // 10 tokens, max_model_len 12: at most 2 drafts fit
  a.draft_tokens = {1, 2, 3, 4};
  b.tokens.push_back(3);
  out = h.scheduler->schedule();
  EXPECT_EQ(out.chunks[0].num_drafts, 2);
  EXPECT_EQ(a.block_table.size(), 3u) << "lookahead stops at max_model_len";
}

TEST(SpecScheduling, PreemptionDropsTheDrafts) {
  SchedulerHarness h(/*budget=*/16, /*k=*/2);
  Sequence& a = h.add(6);
  SchedulerOutput out = h.scheduler->schedule();
  h.scheduler->commit(out);
  a.tokens.push_back(1);
  a.draft_tokens = {2, 3};
  EXPECT_TRUE(h.scheduler->reset_prefix_cache(/*preempt_running=*/true));
  EXPECT_TRUE(a.draft_tokens.empty());
  out = h.scheduler->schedule();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].num_drafts, 0);
  EXPECT_EQ(out.chunks[0].num_tokens, 7) << "the recompute covers the prompt and the output";
}

}  // namespace
}  // namespace hyllm
