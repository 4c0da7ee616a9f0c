// Scheduler and engine core over the checking FakeExecutor.

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "engine_test_util.h"
#include "util/status.h"

namespace hyllm::testing {
namespace {

size_t bytes_for(int slots, int blocks, int block_size) {
  return static_cast<size_t>(slots) * 1000 + static_cast<size_t>(blocks) * 100 * static_cast<size_t>(block_size);
}

TEST(Scheduler, BudgetsHoldEveryStepAndBatchingDoesNotChangeTokens) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  int max_tokens_seen = 0, max_seqs_seen = 0;
  ex.on_step = [&](const StepInput& in) {
    int tokens = 0;
    std::set<int64_t> ids;
    for (const SeqWork& w : in.seqs) {
      tokens += static_cast<int>(w.token_ids.size());
      EXPECT_TRUE(ids.insert(w.seq_id).second) << "a sequence twice in one step";
    }
    max_tokens_seen = std::max(max_tokens_seen, tokens);
    max_seqs_seen = std::max(max_seqs_seen, static_cast<int>(in.seqs.size()));
    EXPECT_LE(tokens, config.max_num_batched_tokens);
    EXPECT_LE(static_cast<int>(in.seqs.size()), config.max_num_seqs);
  };
  EngineCore core(ex, config);
  std::mt19937 rng(1);
  std::map<std::string, int> n_of;
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 20; ++i) {
    auto r = make_request("r" + std::to_string(i), random_prompt(rng, 1 + static_cast<int>(rng() % 60), 64),
                          1 + static_cast<int>(rng() % 20));
    requests.push_back(r);
    n_of[r.request_id] = 1;
    core.add_request(r);
  }
  Results res = run_all(core, n_of);
  EXPECT_EQ(max_tokens_seen, config.max_num_batched_tokens);
  EXPECT_EQ(max_seqs_seen, config.max_num_seqs);
  for (const auto& r : requests) {
    const auto& got = res.by_request.at(r.request_id)[0];
    EXPECT_EQ(got.tokens, solo(r, config)[0].tokens) << r.request_id;
    EXPECT_EQ(static_cast<int>(got.tokens.size()), r.sampling.max_tokens);
    EXPECT_EQ(got.finish, FinishReason::kLength);
    EXPECT_EQ(got.outputs, r.sampling.max_tokens) << "one output per token step";
  }
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
}

TEST(Scheduler, LongPromptIsPrefilledInBudgetSizedChunks) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  std::vector<std::pair<int, int>> chunks;  // (start_pos, size)
  ex.on_step = [&](const StepInput& in) {
    ASSERT_EQ(in.seqs.size(), 1u);
    chunks.emplace_back(in.seqs[0].start_pos, static_cast<int>(in.seqs[0].token_ids.size()));
    EXPECT_EQ(in.seqs[0].sample, in.seqs[0].start_pos + static_cast<int>(in.seqs[0].token_ids.size()) >= 100);
  };
  EngineCore core(ex, config);
  std::mt19937 rng(2);
  core.add_request(make_request("long", random_prompt(rng, 100, 64), 3));
  run_all(core, {{"long", 1}});
  std::vector<std::pair<int, int>> want = {{0, 32}, {32, 32}, {64, 32}, {96, 4}, {100, 1}, {101, 1}};
  EXPECT_EQ(chunks, want);
}

TEST(Scheduler, RunningDecodesShareTheBudgetWithANewPromptChunk) {
  EngineConfig config = small_config();
  config.enable_prefix_caching = false;  // chunks end on block boundaries with it (PrefixCache tests)
  FakeExecutor ex;
  std::vector<std::vector<int>> step_sizes;
  ex.on_step = [&](const StepInput& in) {
    std::vector<int> sizes;
    for (const SeqWork& w : in.seqs) sizes.push_back(static_cast<int>(w.token_ids.size()));
    step_sizes.push_back(sizes);
  };
  EngineCore core(ex, config);
  std::mt19937 rng(3);
  core.add_request(make_request("a", random_prompt(rng, 10, 64), 10));
  core.add_request(make_request("b", random_prompt(rng, 10, 64), 10));
  core.step();  // a: 10, b: 10
  core.add_request(make_request("c", random_prompt(rng, 80, 64), 2));
  core.step();  // a: 1, b: 1, c: 30 (the rest of the budget)
  ASSERT_EQ(step_sizes.size(), 2u);
  EXPECT_EQ(step_sizes[0], (std::vector<int>{10, 10}));
  EXPECT_EQ(step_sizes[1], (std::vector<int>{1, 1, 30}));
}

TEST(Scheduler, PreemptionFreesRequeuesAndRecomputesTheSameTokens) {
  EngineConfig config = small_config();
  // 160 tokens of KV; slots for 8 running sequences and 8 snapshots.
  config.kv_cache_memory_bytes = bytes_for(16, 40, config.block_size);
  FakeExecutor ex;
  EngineCore core(ex, config);
  ASSERT_EQ(core.cache_plan().num_blocks, 40);
  std::mt19937 rng(4);
  std::map<std::string, int> n_of;
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 8; ++i) {
    auto r = make_request("p" + std::to_string(i), random_prompt(rng, 20 + i * 3, 64), 40);
    requests.push_back(r);
    n_of[r.request_id] = 1;
    core.add_request(r);
  }
  Results res = run_all(core, n_of);
  EXPECT_GT(core.stats().num_preemptions, 0u);
  for (const auto& r : requests) {
    EXPECT_EQ(res.by_request.at(r.request_id)[0].tokens, solo(r, config)[0].tokens) << r.request_id;
  }
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
}

TEST(Scheduler, PreemptsTheNewestRunningSequence) {
  EngineConfig config = small_config();
  config.kv_cache_memory_bytes = bytes_for(8, 32, config.block_size);  // 128 tokens
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(5);
  core.add_request(make_request("old", random_prompt(rng, 30, 64), 90));
  core.step();
  core.add_request(make_request("new", random_prompt(rng, 30, 64), 90));
  while (core.stats().num_preemptions == 0 && core.has_unfinished_requests()) core.step();
  ASSERT_EQ(core.stats().num_preemptions, 1u);
  ASSERT_EQ(core.scheduler().running().size(), 1u);
  EXPECT_EQ(core.scheduler().running()[0]->request->id, "old");
  ASSERT_EQ(core.scheduler().waiting().size(), 1u);
  const Sequence& victim = *core.scheduler().waiting().front();
  EXPECT_EQ(victim.request->id, "new");
  EXPECT_EQ(victim.num_computed_tokens, 0);
  EXPECT_TRUE(victim.block_table.empty());
  EXPECT_EQ(victim.state_slot, -1);
  EXPECT_GT(victim.num_output_tokens(), 0) << "outputs survive preemption";
}

TEST(Scheduler, AbortFreesEverythingWithinOneStep) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(6);
  core.add_request(make_request("x", random_prompt(rng, 50, 64), 30, 3));
  core.add_request(make_request("y", random_prompt(rng, 50, 64), 30));
  for (int i = 0; i < 4; ++i) core.step();
  EXPECT_GT(core.scheduler().block_pool().num_used(), 0);
  core.abort_request("x");
  core.abort_request("y");
  core.abort_request("unknown");
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
  auto outs = core.step();
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& o : outs) {
    EXPECT_TRUE(o.finished);
    EXPECT_EQ(o.outputs.size(), o.request_id == "x" ? 3u : 1u);
    for (const auto& c : o.outputs) EXPECT_EQ(c.finish_reason, FinishReason::kAbort);
  }
  EXPECT_FALSE(core.has_unfinished_requests());
  EXPECT_EQ(core.stats().request_finished[static_cast<size_t>(FinishReason::kAbort)], 4u);
}

TEST(Scheduler, AbortWhileWaitingLeavesOthersRunning) {
  EngineConfig config = small_config();
  config.max_num_seqs = 1;
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(7);
  core.add_request(make_request("a", random_prompt(rng, 5, 64), 5));
  core.add_request(make_request("b", random_prompt(rng, 5, 64), 5));
  core.step();
  EXPECT_EQ(core.scheduler().waiting().size(), 1u);
  core.abort_request("b");
  Results res = run_all(core, {{"a", 1}, {"b", 1}});
  EXPECT_EQ(res.by_request.at("b")[0].finish, FinishReason::kAbort);
  EXPECT_EQ(res.by_request.at("a")[0].finish, FinishReason::kLength);
}

void expect_invalid(EngineCore& core, const EngineRequest& r, const std::string& fragment) {
  try {
    core.validate(r);
    ADD_FAILURE() << "accepted: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Scheduler, RequestsThatCanNeverRunAreRefused) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  expect_invalid(core, make_request("a", std::vector<int32_t>(100, 1), 29), "maximum context length is 128");
  expect_invalid(core, make_request("a", std::vector<int32_t>(128, 1), 1), "maximum context length is 128");
  expect_invalid(core, make_request("a", {}, 1), "prompt cannot be empty");
  expect_invalid(core, make_request("a", {64}, 1), "out of vocabulary");
  expect_invalid(core, make_request("a", {1}, 0), "max_tokens");
  expect_invalid(core, make_request("a", {1}, 4, 9), "n=9");
  auto r = make_request("a", {1}, 4);
  r.sampling.top_p = 0.0f;
  expect_invalid(core, r, "top_p");
  r = make_request("a", {1}, 4);
  r.sampling.logprobs = 21;
  expect_invalid(core, r, "max allowed: 20");
  {
    EngineConfig wide = config;  // --max-logprobs 50
    wide.max_logprobs = 50;
    EngineCore wide_core(ex, wide);
    r.sampling.logprobs = 50;
    EXPECT_NO_THROW(wide_core.validate(r));
    r.sampling.logprobs = 51;
    expect_invalid(wide_core, r, "max allowed: 50");
  }
  r = make_request("a", {1}, 4);
  r.sampling.stop = {"x"};
  expect_invalid(core, r, "StopStringHook");
  r = make_request("a", {1}, 4);
  r.sampling.logit_bias = {{64, 1.0f}};
  expect_invalid(core, r, "logit_bias: token id 64 is out of vocabulary");
  r.sampling.logit_bias = {{3, 1.0f}, {3, 2.0f}};
  expect_invalid(core, r, "ascend");
  r.sampling.logit_bias = {{3, std::numeric_limits<float>::infinity()}};
  expect_invalid(core, r, "not finite");
  EXPECT_NO_THROW(core.validate(make_request("a", std::vector<int32_t>(100, 1), 28)));
}

TEST(Scheduler, StartupRefusesMaxModelLenAboveKvCapacity) {
  EngineConfig config = small_config();
  // One slot and 124 tokens of KV: less than one max_model_len sequence.
  config.kv_cache_memory_bytes = bytes_for(1, 31, config.block_size);
  FakeExecutor ex;
  try {
    EngineCore core(ex, config);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max seq len (128) is larger than the maximum number of tokens"),
              std::string::npos) << e.what();
  }
}

TEST(CachePlan, SlotsTakeAtMostHalfTheBudgetAndShrinkForOneFullSequence) {
  CachePlanInput in;
  in.kv_bytes_per_token = 100;
  in.bytes_per_state_slot = 10000;
  in.block_size = 10;
  in.max_num_seqs = 100;
  in.max_model_len = 100;
  in.budget_bytes = 100000;  // half = 5 slots
  CachePlan p = plan_cache(in);
  EXPECT_EQ(p.num_state_slots, 5);
  EXPECT_EQ(p.num_blocks, 50);
  in.max_model_len = 800;  // needs 80 blocks = 80000 bytes: 2 slots remain
  p = plan_cache(in);
  EXPECT_EQ(p.num_state_slots, 2);
  EXPECT_EQ(p.num_blocks, 80);
  EXPECT_DOUBLE_EQ(p.max_concurrency, 1.0);
  in.max_num_seqs = 1;
  in.max_model_len = 100;
  p = plan_cache(in);
  EXPECT_EQ(p.num_state_slots, 1);
  EXPECT_EQ(p.num_blocks, 90);
  in.max_model_len = 1000;  // 100000 bytes of KV leave no room for a slot
  EXPECT_THROW(plan_cache(in), Error);
  in.max_model_len = 10;
  in.budget_bytes = 9999;  // not even one slot
  EXPECT_THROW(plan_cache(in), Error);
  in.budget_bytes = 100000;
  in.max_num_seqs = 8;
  in.num_blocks_override = 3;  // 3000 bytes of KV; slots get the rest, up to max_num_seqs
  p = plan_cache(in);
  EXPECT_EQ(p.num_blocks, 3);
  EXPECT_EQ(p.num_state_slots, 8);
  in.max_model_len = 31;
  EXPECT_THROW(plan_cache(in), Error);
}

// The executor's reserved block and slot (padding rows of graph-replayed
// decode steps) are allocated on top of the pools: the plan's counts and
// capacities are what sequences can use.
TEST(CachePlan, ReservedBlocksAndSlotsAreLeftOutOfThePools) {
  CachePlanInput in;
  in.kv_bytes_per_token = 100;
  in.bytes_per_state_slot = 10000;
  in.block_size = 10;
  in.max_num_seqs = 2;
  in.max_model_len = 100;
  in.budget_bytes = 100000;
  const CachePlan plain = plan_cache(in);
  EXPECT_EQ(plain.num_state_slots, 2);
  EXPECT_EQ(plain.num_blocks, 80);
  in.reserved_blocks = 1;
  in.reserved_state_slots = 1;
  CachePlan p = plan_cache(in);
  EXPECT_EQ(p.reserved_blocks, 1);
  EXPECT_EQ(p.reserved_state_slots, 1);
  EXPECT_EQ(p.num_state_slots, 2) << "a slot for every sequence, the reserved one on top";
  EXPECT_EQ(p.num_blocks, 69) << "70 blocks fit beside 3 slots";
  EXPECT_EQ(p.kv_capacity_tokens, 690);
  EXPECT_EQ(p.state_bytes, 30000u);
  EXPECT_EQ(p.kv_bytes, 70000u);
  in.max_num_seqs = 100;  // the half-budget cap binds: 5 slots in all
  p = plan_cache(in);
  EXPECT_EQ(p.num_state_slots, 4);
  EXPECT_EQ(p.num_blocks, 49);
  in.num_blocks_override = 3;  // the override counts the reserved block, as vLLM's counts its null block
  in.max_num_seqs = 8;
  in.max_model_len = 20;
  p = plan_cache(in);
  EXPECT_EQ(p.num_blocks, 2);
  EXPECT_EQ(p.num_state_slots, 8);
  in.max_model_len = 21;  // needs 3 usable blocks
  EXPECT_THROW(plan_cache(in), Error);
  in.num_blocks_override.reset();
  in.max_model_len = 100;
  in.budget_bytes = 19999;  // one slot beside the reserved one does not fit
  EXPECT_THROW(plan_cache(in), Error);
}

TEST(CachePlan, PrefixCachingWantsASnapshotSlotPerSequenceUnderTheSameCap) {
  CachePlanInput in;
  in.kv_bytes_per_token = 100;
  in.bytes_per_state_slot = 10000;
  in.block_size = 10;
  in.max_num_seqs = 2;
  in.max_model_len = 100;
  in.budget_bytes = 100000;
  in.enable_prefix_caching = true;
  CachePlan p = plan_cache(in);
  EXPECT_EQ(p.num_state_slots, 4) << "2 running + 2 snapshots";
  EXPECT_EQ(p.num_blocks, 60);
  EXPECT_DOUBLE_EQ(p.max_concurrency, 2.0) << "snapshots add no concurrency";
  in.max_num_seqs = 100;  // the half-budget cap binds: as many slots as without caching
  p = plan_cache(in);
  EXPECT_EQ(p.num_state_slots, 5);
  in.enable_prefix_caching = false;
  EXPECT_EQ(plan_cache(in).num_state_slots, 5);
  in.num_blocks_override = 3;
  in.max_num_seqs = 2;
  in.max_model_len = 30;
  in.enable_prefix_caching = true;
  EXPECT_EQ(plan_cache(in).num_state_slots, 4);
}

}  // namespace
}  // namespace hyllm::testing
