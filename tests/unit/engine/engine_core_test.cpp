// Engine core: stop conditions, n > 1 forks, seeds, failures, and many random
// request lifecycles without leaks.

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "engine_test_util.h"
#include "util/log.h"
#include "util/status.h"

namespace hyllm::testing {
namespace {

const bool quiet_logs = [] {
  spdlog::set_level(spdlog::level::warn);
  return true;
}();

TEST(EngineCore, ForkedChoicesShareThePromptAndMatchSoloRunsWithShiftedSeeds) {
  EngineConfig config = small_config();
  config.max_num_batched_tokens = 64;
  FakeExecutor ex;
  int state_copies = 0, block_copies = 0, prompt_tokens_computed = 0;
  ex.on_step = [&](const StepInput& in) {
    state_copies += static_cast<int>(in.state_slot_copies.size());
    block_copies += static_cast<int>(in.kv_block_copies.size());
    for (const SeqWork& w : in.seqs) {
      if (w.start_pos < 30) prompt_tokens_computed += static_cast<int>(w.token_ids.size());
    }
  };
  EngineCore core(ex, config);
  std::mt19937 rng(11);
  EngineRequest r = make_request("fork", random_prompt(rng, 30, 64), 12, 4);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 77;
  core.add_request(r);
  Results res = run_all(core, {{"fork", 4}});
  // 29 prompt tokens once (in one chunk, which saves the state at the last
  // block boundary for the prefix cache inside its step), then the last
  // prompt token per choice.
  EXPECT_EQ(prompt_tokens_computed, 29 + 4);
  EXPECT_EQ(state_copies, 3) << "three forks";
  EXPECT_EQ(ex.num_saves, 1) << "one snapshot saved inside the prompt's step";
  EXPECT_EQ(block_copies, 3) << "the shared partial block is copied on write by all but one choice";
  const auto& choices = res.by_request.at("fork");
  ASSERT_EQ(choices.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EngineRequest alone = r;
    alone.sampling.n = 1;
    alone.sampling.seed = 77 + i;
    EXPECT_EQ(choices[static_cast<size_t>(i)].tokens, solo(alone, config)[0].tokens) << "choice " << i;
    EXPECT_EQ(choices[static_cast<size_t>(i)].finish, FinishReason::kLength);
  }
  EXPECT_NE(choices[0].tokens, choices[1].tokens) << "different seeds should differ somewhere";
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
}

TEST(EngineCore, ForkOfAOneTokenPromptAndForkUnderPreemption) {
  EngineConfig config = small_config();
  config.kv_cache_memory_bytes = 8 * 1000 + 40 * 400;  // 160 tokens
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(12);
  std::map<std::string, int> n_of;
  std::vector<EngineRequest> reqs;
  reqs.push_back(make_request("one", {5}, 6, 3));
  for (int i = 0; i < 4; ++i) reqs.push_back(make_request("f" + std::to_string(i), random_prompt(rng, 23, 64), 50, 2));
  for (auto& r : reqs) {
    n_of[r.request_id] = r.sampling.n;
    core.add_request(r);
  }
  Results res = run_all(core, n_of);
  EXPECT_GT(core.stats().num_preemptions, 0u);
  for (const auto& r : reqs) {
    auto want = solo(r, config);
    const auto& got = res.by_request.at(r.request_id);
    for (int i = 0; i < r.sampling.n; ++i) {
      EXPECT_EQ(got[static_cast<size_t>(i)].tokens, want[static_cast<size_t>(i)].tokens) << r.request_id << "/" << i;
      EXPECT_EQ(got[static_cast<size_t>(i)].tokens.size(), static_cast<size_t>(r.sampling.max_tokens));
    }
  }
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
}

// Learns what a request generates, so tests can make one of those tokens special.
std::vector<int32_t> greedy_tokens(const EngineRequest& r) { return solo(r, small_config())[0].tokens; }

// Finds a prompt whose greedy output has a token at `at` that does not occur before it.
EngineRequest request_with_fresh_token_at(int at, int32_t* token, int max_tokens = 20) {
  std::mt19937 rng(100);
  for (;;) {
    EngineRequest r = make_request("s", random_prompt(rng, 8, 64), max_tokens);
    auto toks = greedy_tokens(r);
    if (std::find(toks.begin(), toks.begin() + at, toks[static_cast<size_t>(at)]) == toks.begin() + at) {
      *token = toks[static_cast<size_t>(at)];
      return r;
    }
  }
}

TEST(EngineCore, EosStopsUnlessIgnoredAndStopTokenIdsReportTheToken) {
  int32_t special = -1;
  EngineRequest r = request_with_fresh_token_at(5, &special);
  EngineConfig config = small_config();
  config.eos_token_ids = {special};
  auto got = solo(r, config)[0];
  EXPECT_EQ(got.tokens.size(), 6u);
  EXPECT_EQ(got.finish, FinishReason::kStop);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(got.stop_reason));

  r.sampling.ignore_eos = true;
  got = solo(r, config)[0];
  EXPECT_EQ(got.tokens.size(), 20u);
  EXPECT_EQ(got.finish, FinishReason::kLength);

  r.sampling.ignore_eos = false;
  config.eos_token_ids.clear();
  r.sampling.stop_token_ids = {special};
  got = solo(r, config)[0];
  EXPECT_EQ(got.tokens.size(), 6u);
  EXPECT_EQ(got.finish, FinishReason::kStop);
  ASSERT_TRUE(std::holds_alternative<int32_t>(got.stop_reason));
  EXPECT_EQ(std::get<int32_t>(got.stop_reason), special);
}

TEST(EngineCore, MinTokensMasksEosUntilReached) {
  int32_t special = -1;
  EngineRequest r = request_with_fresh_token_at(1, &special);
  EngineConfig config = small_config();
  config.eos_token_ids = {special};
  EXPECT_EQ(solo(r, config)[0].tokens.size(), 2u);
  r.sampling.min_tokens = 4;
  auto got = solo(r, config)[0];
  EXPECT_GE(got.tokens.size(), 4u);
  for (size_t i = 0; i < 4 && i < got.tokens.size(); ++i) EXPECT_NE(got.tokens[i], special) << i;
}

class ScriptedStop : public StopStringHook {
 public:
  explicit ScriptedStop(int stop_after) : stop_after_(stop_after) {}
  StopCheck on_tokens(int choice, std::span<const int32_t> ids, bool may_stop) override {
    calls += static_cast<int>(ids.size());
    may_stop_flags.push_back(may_stop);
    StopCheck c;
    c.text = "<" + std::to_string(ids[0]) + ">";
    if (calls >= stop_after_) c.matched_stop = "STOP";
    return c;
  }
  int calls = 0;
  std::vector<bool> may_stop_flags;

 private:
  int stop_after_;
};

TEST(EngineCore, StopStringHookSeesEachTokenOnceAndStopsAfterMinTokens) {
  EngineConfig config = small_config();
  config.kv_cache_memory_bytes = 8 * 1000 + 40 * 400;
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(13);
  std::map<std::string, int> n_of;
  auto hook = std::make_shared<ScriptedStop>(2);
  EngineRequest r = make_request("hooked", random_prompt(rng, 20, 64), 60);
  r.sampling.stop = {"STOP"};
  r.sampling.min_tokens = 30;  // a match before then is ignored
  r.stop_hook = hook;
  core.add_request(r);
  n_of["hooked"] = 1;
  for (int i = 0; i < 6; ++i) {  // crowd the cache to force preemptions
    auto other = make_request("o" + std::to_string(i), random_prompt(rng, 30, 64), 60);
    n_of[other.request_id] = 1;
    core.add_request(other);
  }
  Results res = run_all(core, n_of);
  EXPECT_GT(core.stats().num_preemptions, 0u);
  const auto& got = res.by_request.at("hooked")[0];
  EXPECT_EQ(got.tokens.size(), 31u);
  EXPECT_EQ(hook->calls, 31);
  EXPECT_EQ(got.finish, FinishReason::kStop);
  ASSERT_TRUE(std::holds_alternative<std::string>(got.stop_reason));
  EXPECT_EQ(std::get<std::string>(got.stop_reason), "STOP");
  EXPECT_FALSE(hook->may_stop_flags[29]);
  EXPECT_TRUE(hook->may_stop_flags[30]);
  std::string want_text;
  for (int32_t t : got.tokens) want_text += "<" + std::to_string(t) + ">";
  EXPECT_EQ(got.text, want_text);
}

TEST(EngineCore, SeededSamplingDoesNotDependOnTheBatch) {
  EngineConfig config = small_config();
  std::mt19937 rng(14);
  EngineRequest r = make_request("seeded", random_prompt(rng, 17, 64), 25);
  r.sampling.temperature = 1.3f;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 1234;
  const auto alone = solo(r, config)[0].tokens;
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::map<std::string, int> n_of{{"seeded", 1}};
  for (int i = 0; i < 6; ++i) {
    auto other = make_request("o" + std::to_string(i), random_prompt(rng, 5 + i * 7, 64), 30);
    other.sampling.temperature = 1.0f;
    n_of[other.request_id] = 1;
    core.add_request(other);
  }
  core.step();
  core.add_request(r);
  Results res = run_all(core, n_of);
  EXPECT_EQ(res.by_request.at("seeded")[0].tokens, alone);
}

TEST(EngineCore, LogprobsArePassedThroughPerToken) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(15);
  EngineRequest r = make_request("lp", random_prompt(rng, 5, 64), 4);
  r.sampling.logprobs = 3;
  core.add_request(r);
  int outputs = 0;
  while (core.has_unfinished_requests()) {
    for (const auto& out : core.step()) {
      for (const auto& c : out.outputs) {
        ASSERT_EQ(c.logprobs.size(), c.new_token_ids.size());
        for (size_t i = 0; i < c.logprobs.size(); ++i) {
          EXPECT_EQ(c.logprobs[i].token, c.new_token_ids[i]);
          ASSERT_EQ(c.logprobs[i].top_logprobs.size(), 3u);
          EXPECT_EQ(c.logprobs[i].top_logprobs[0].first, c.new_token_ids[i]) << "greedy picks the most likely";
          EXPECT_FLOAT_EQ(c.logprobs[i].top_logprobs[0].second, c.logprobs[i].logprob);
        }
        outputs++;
      }
    }
  }
  EXPECT_EQ(outputs, 4);
}

TEST(EngineCore, ExecutorFailureFailsTheStepsRequestsAndTheEngineGoesOn) {
  EngineConfig config = small_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  std::mt19937 rng(16);
  core.add_request(make_request("a", random_prompt(rng, 5, 64), 5));
  core.step();
  ex.fail_next_step();
  auto outs = core.step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_TRUE(outs[0].finished);
  EXPECT_EQ(outs[0].outputs[0].finish_reason, FinishReason::kError);
  EXPECT_NE(outs[0].error_message.find("injected failure"), std::string::npos);
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
  core.add_request(make_request("b", random_prompt(rng, 5, 64), 5));
  Results res = run_all(core, {{"b", 1}});
  EXPECT_EQ(res.by_request.at("b")[0].tokens.size(), 5u);
}

// 10,000 random requests under constant preemption, with random aborts; with
// prefix caching on, prompts share prefixes (hits, snapshots, evictions) and
// the cache is reset now and then. After every step the cache accounting
// must match the running sequences exactly; at the end nothing is held.
void run_random_lifecycles(bool prefix_caching) {
  EngineConfig config = small_config();
  config.max_num_seqs = 16;
  config.max_model_len = 64;
  config.enable_prefix_caching = prefix_caching;
  config.kv_cache_memory_bytes = 16 * 1000 + 30 * 400;  // 120 tokens: constant preemption
  FakeExecutor::Options opt;
  opt.vocab_size = 16;
  FakeExecutor ex(opt);
  EngineCore core(ex, config);
  std::mt19937 rng(17);
  std::map<std::string, size_t> prompt_len;
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 6; ++i) prefixes.push_back(random_prompt(rng, 4 + static_cast<int>(rng() % 20), 16));
  std::vector<std::string> live;
  int submitted = 0, finished = 0, resets = 0, scored_prompts = 0;
  while (finished < 10000) {
    while (submitted < 10000 && core.num_live_requests() < 24) {
      std::vector<int32_t> prompt;
      if (rng() % 3 != 0) prompt = prefixes[rng() % prefixes.size()];
      const auto tail = random_prompt(rng, 1 + static_cast<int>(rng() % 30), 16);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      if (prompt.size() > 40) prompt.resize(40);
      const int len = static_cast<int>(prompt.size());
      auto r = make_request("r" + std::to_string(submitted++), std::move(prompt),
                            1 + static_cast<int>(rng() % static_cast<unsigned>(64 - len)),
                            1 + static_cast<int>(rng() % 3));
      r.sampling.temperature = (rng() % 2) ? 1.0f : 0.0f;
      if (rng() % 4 == 0) r.sampling.stop_token_ids = {static_cast<int32_t>(rng() % 16)};
      if (rng() % 5 == 0) r.sampling.prompt_logprobs = static_cast<int>(rng() % 3);
      prompt_len[r.request_id] = r.prompt_token_ids.size();
      core.validate(r);
      live.push_back(r.request_id);
      core.add_request(std::move(r));
    }
    if (rng() % 10 == 0 && !live.empty()) core.abort_request(live[rng() % live.size()]);
    if (rng() % 500 == 0) resets += core.reset_prefix_cache(rng() % 2 == 0);
    for (const auto& out : core.step()) {
      if (!out.prompt_logprobs.empty()) {
        ASSERT_EQ(out.prompt_logprobs.size() + 1, prompt_len.at(out.request_id));
        scored_prompts++;
      }
      if (out.finished) {
        finished++;
        live.erase(std::find(live.begin(), live.end(), out.request_id));
      }
    }
    // Every block in use is referenced by exactly as many running sequences,
    // and every live slot is a running sequence's or reserved for a fork.
    const Scheduler& sched = core.scheduler();
    std::map<int32_t, int> refs;
    std::set<int32_t> live_slots;
    for (const Sequence* s : sched.running()) {
      for (int32_t b : s->block_table) refs[b]++;
      ASSERT_TRUE(live_slots.insert(s->state_slot).second) << "a slot held twice";
      ASSERT_FALSE(sched.slot_pool().is_snapshot(s->state_slot));
      for (int32_t r : s->request->reserved_slots) ASSERT_TRUE(live_slots.insert(r).second);
    }
    for (const Sequence* s : sched.waiting()) {
      ASSERT_TRUE(s->block_table.empty());
      ASSERT_EQ(s->state_slot, -1);
    }
    ASSERT_EQ(static_cast<int>(refs.size()), sched.block_pool().num_used());
    for (auto [b, n] : refs) ASSERT_EQ(sched.block_pool().ref_count(b), n);
    const StateSlotPool& slots = sched.slot_pool();
    ASSERT_EQ(static_cast<int>(live_slots.size()), slots.num_used());
    ASSERT_EQ(slots.num_free() + slots.num_used() + slots.num_snapshots(), slots.num_slots());
  }
  EXPECT_FALSE(core.has_unfinished_requests());
  const Scheduler& sched = core.scheduler();
  EXPECT_EQ(sched.block_pool().num_used(), 0);
  EXPECT_EQ(sched.slot_pool().num_used(), 0);
  const auto stats = core.stats();
  EXPECT_GT(stats.num_preemptions, 100u);
  EXPECT_GT(scored_prompts, 1000) << "prompt logprobs under preemption";
  EXPECT_EQ(stats.request_finished[static_cast<size_t>(FinishReason::kError)], 0u);
  if (prefix_caching) {
    EXPECT_GT(stats.prefix_cache_hits, 0u) << "prefixes are shared";
    EXPECT_GT(resets, 0);
    // What stays cached is free to evict; a reset leaves nothing at all.
    EXPECT_GT(sched.slot_pool().num_snapshots() + sched.block_pool().num_cached(), 0);
    EXPECT_TRUE(core.reset_prefix_cache(false));
    EXPECT_EQ(sched.num_pending_saves(), 0);
  }
  EXPECT_EQ(sched.slot_pool().num_snapshots(), 0);
  EXPECT_EQ(sched.slot_pool().num_free(), sched.slot_pool().num_slots());
  EXPECT_EQ(sched.block_pool().num_cached(), 0);
  EXPECT_EQ(sched.block_pool().num_free(), sched.block_pool().num_blocks());
}

TEST(EngineCore, TenThousandRandomLifecyclesWithPrefixCachingLeakNothing) { run_random_lifecycles(true); }

TEST(EngineCore, TenThousandRandomLifecyclesWithoutPrefixCachingLeakNothing) { run_random_lifecycles(false); }

}  // namespace
}  // namespace hyllm::testing
