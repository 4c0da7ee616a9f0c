// Prefix caching in the scheduler and engine core, over the checking
// FakeExecutor: a hit restores the KV blocks and the GDN state of a cached
// prefix (the fake model checks both against the tokens on every sample, so
// a stale block, a missed copy or a wrong snapshot fails the step), and the
// tokens are those of a run without the cache.

#include <gtest/gtest.h>

#include <random>

#include "engine_test_util.h"
#include "util/log.h"

namespace hyllm::testing {
namespace {

const bool quiet_logs = [] {
  spdlog::set_level(spdlog::level::warn);
  return true;
}();

EngineConfig caching_config() {
  EngineConfig c = small_config();
  c.enable_prefix_caching = true;
  return c;
}

EngineConfig cold_config() {
  EngineConfig c = small_config();
  c.enable_prefix_caching = false;
  return c;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Records each request's chunks (start_pos, tokens) as the executor sees them.
struct ChunkLog {
  std::map<int64_t, std::vector<std::pair<int, int>>> by_seq;
  std::vector<std::pair<int, int>> first_chunks;  // the first chunk of every new seq_id
  int state_copies = 0, block_copies = 0;
  void attach(FakeExecutor& ex) {
    ex.on_step = [this](const StepInput& in) {
      state_copies += static_cast<int>(in.state_slot_copies.size());
      block_copies += static_cast<int>(in.kv_block_copies.size());
      for (const SeqWork& w : in.seqs) {
        auto& v = by_seq[w.seq_id];
        if (v.empty()) first_chunks.emplace_back(w.start_pos, static_cast<int>(w.token_ids.size()));
        v.emplace_back(w.start_pos, static_cast<int>(w.token_ids.size()));
      }
    };
  }
};

// Runs one request to the end; returns its tokens and its output's cached count.
std::pair<std::vector<int32_t>, int> run_one(EngineCore& core, const EngineRequest& r) {
  core.add_request(r);
  std::vector<int32_t> tokens;
  int cached = -1;
  while (core.has_unfinished_requests()) {
    for (const RequestOutput& o : core.step()) {
      EXPECT_TRUE(o.error_message.empty()) << o.error_message;
      cached = o.num_cached_tokens;
      for (const auto& c : o.outputs) tokens.insert(tokens.end(), c.new_token_ids.begin(), c.new_token_ids.end());
    }
  }
  return {tokens, cached};
}

TEST(PrefixCache, ChunksEndOnBlockBoundariesAndThePromptsLastBoundaryIsSavedInsideItsChunk) {
  EngineConfig config = caching_config();  // budget 32, blocks of 4
  FakeExecutor ex;
  ChunkLog log;
  log.attach(ex);
  EngineCore core(ex, config);
  std::mt19937 rng(1);
  run_one(core, make_request("a", random_prompt(rng, 70, 64), 2));
  // 32, 32, then the prompt's last 6 tokens in one chunk that samples; the
  // state at the prompt's last boundary (68) is saved inside that step.
  const std::vector<std::pair<int, int>> want = {{0, 32}, {32, 32}, {64, 6}, {70, 1}};
  EXPECT_EQ(log.by_seq.begin()->second, want);
  EXPECT_EQ(ex.num_saves, 1);
  EXPECT_EQ(core.scheduler().slot_pool().num_snapshots(), 3 + 1) << "32, 64, 68, and the finished sequence";
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
}

// The last block boundary of an unaligned prompt costs no step: its first
// token comes from the one step that computes the whole prompt, and the
// state saved at the boundary in that step serves a later prompt that
// shares the first turn only up to a few tokens before its end (a chat's
// next turn). Its tokens are those of a cold run.
TEST(PrefixCache, AnUnalignedPromptTakesOneStepAndItsMidStepSnapshotIsHit) {
  EngineConfig config = caching_config();  // budget 32, blocks of 4
  FakeExecutor ex;
  ChunkLog log;
  log.attach(ex);
  EngineCore core(ex, config);
  std::mt19937 rng(11);
  const auto first = random_prompt(rng, 30, 64);
  core.add_request(make_request("first", first, 3));
  const std::vector<RequestOutput> step1 = core.step();
  ASSERT_EQ(step1.size(), 1u);
  ASSERT_EQ(step1[0].outputs.size(), 1u);
  EXPECT_EQ(step1[0].outputs[0].new_token_ids.size(), 1u) << "the first token comes from the first step";
  EXPECT_EQ(log.by_seq.begin()->second, (std::vector<std::pair<int, int>>{{0, 30}}));
  EXPECT_EQ(ex.num_saves, 1);
  while (core.has_unfinished_requests()) core.step();

  // Shares 29 tokens: the hit is the snapshot at 28 saved inside that step
  // (the first request's own final state is at 32, past the divergence).
  std::vector<int32_t> next(first.begin(), first.begin() + 29);
  next = concat(next, random_prompt(rng, 9, 64));
  const auto r = make_request("next", next, 6);
  auto [tokens, cached] = run_one(core, r);
  EXPECT_EQ(cached, 28);
  EXPECT_EQ(tokens, solo(r, cold_config())[0].tokens);
  EXPECT_EQ(log.first_chunks.back(), (std::pair<int, int>{28, 10}));
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
}

// Two identical prompts in one step both reserve a slot for the same
// snapshot; the second one's is released after the step, and a failed step
// releases its reserved slots.
TEST(PrefixCache, ReservedSaveSlotsAreReleasedWhenTheSnapshotExistsOrTheStepFails) {
  std::mt19937 rng(12);
  const auto prompt = random_prompt(rng, 14, 64);
  FakeExecutor ex;
  EngineCore core(ex, caching_config());
  core.add_request(make_request("a", prompt, 2));
  core.add_request(make_request("b", prompt, 2));
  core.step();
  EXPECT_EQ(ex.num_saves, 2);
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 2) << "the two live slots only";
  EXPECT_EQ(core.scheduler().slot_pool().num_snapshots(), 1) << "the state at 12, once";
  while (core.has_unfinished_requests()) core.step();

  const auto other = random_prompt(rng, 14, 64);
  core.add_request(make_request("c", other, 2));
  ex.fail_next_step();
  core.step();
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
  auto [tokens, cached] = run_one(core, make_request("d", other, 2));
  EXPECT_EQ(cached, 0) << "the failed step saved nothing";
  EXPECT_EQ(tokens, solo(make_request("d", other, 2), cold_config())[0].tokens);
}

TEST(PrefixCache, ASharedPrefixIsComputedOnceAfterTheFirstRequestThatSavesItsState) {
  std::mt19937 rng(2);
  const auto shared = random_prompt(rng, 30, 64);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(make_request("r" + std::to_string(i), concat(shared, random_prompt(rng, 9, 64)), 6));
  FakeExecutor ex;
  ChunkLog log;
  log.attach(ex);
  EngineCore core(ex, caching_config());
  std::vector<int> cached;
  for (const auto& r : reqs) {
    auto [tokens, n] = run_one(core, r);
    EXPECT_EQ(tokens, solo(r, cold_config())[0].tokens) << r.request_id;
    cached.push_back(n);
  }
  // r0 computes everything; r1 finds 28 tokens of cached blocks but no state
  // there, so it computes them again and saves the state at 28; r2 and r3 hit.
  EXPECT_EQ(cached, (std::vector<int>{0, 0, 28, 28}));
  ASSERT_EQ(log.first_chunks.size(), 4u);
  EXPECT_EQ(log.first_chunks[1], (std::pair<int, int>{0, 28}));
  EXPECT_EQ(log.first_chunks[2].first, 28);
  EXPECT_EQ(log.first_chunks[3].first, 28);
  const EngineStats s = core.stats();
  EXPECT_EQ(s.prefix_cache_queries, 4u * 39u);
  EXPECT_EQ(s.prefix_cache_hits, 56u);
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(core.scheduler().slot_pool().num_used(), 0);
}

TEST(PrefixCache, ARepeatedPromptHitsItsLastBoundaryBelowTheLastToken) {
  std::mt19937 rng(3);
  const auto r = make_request("same", random_prompt(rng, 24, 64), 5);  // 24: a multiple of the block size
  FakeExecutor ex;
  ChunkLog log;
  log.attach(ex);
  EngineCore core(ex, caching_config());
  const auto cold = solo(r, cold_config())[0].tokens;
  std::vector<int> cached;
  for (int i = 0; i < 3; ++i) {
    auto req = r;
    req.request_id = "same" + std::to_string(i);
    auto [tokens, n] = run_one(core, req);
    EXPECT_EQ(tokens, cold);
    cached.push_back(n);
  }
  // The state after all 24 tokens cannot serve: the last token is computed
  // for its logits. The second run saves the state at 20; the third hits it.
  EXPECT_EQ(cached, (std::vector<int>{0, 0, 20}));
}

TEST(PrefixCache, AConversationHitsTheEndOfThePreviousTurnExactly) {
  std::mt19937 rng(4);
  EngineConfig config = caching_config();
  FakeExecutor ex;
  ChunkLog log;
  log.attach(ex);
  EngineCore core(ex, config);
  auto history = random_prompt(rng, 10, 64);
  int kept = 0;  // tokens the previous turn computed
  for (int turn = 0; turn < 4; ++turn) {
    const auto r = make_request("t" + std::to_string(turn), history, 5);
    auto [tokens, cached] = run_one(core, r);
    EXPECT_EQ(tokens, solo(r, cold_config())[0].tokens) << turn;
    // The previous turn kept its state after all its computed tokens (its
    // last sampled token is not computed), with the partial last block.
    EXPECT_EQ(cached, kept) << turn;
    if (turn > 0) {
      EXPECT_NE(kept % config.block_size, 0) << turn << ": the test wants hits inside a block";
    }
    kept = static_cast<int>(history.size() + tokens.size()) - 1;
    history = concat(concat(history, tokens), random_prompt(rng, 7, 64));
  }
  EXPECT_GT(log.block_copies, 0) << "a hit copies the tail block";
}

TEST(PrefixCache, PreemptedSequencesResumeFromTheStateTheyKept) {
  EngineConfig config = caching_config();
  config.kv_cache_memory_bytes = 16 * 1000 + 40 * 400;  // 160 tokens of KV
  FakeExecutor ex;
  ChunkLog log;
  log.attach(ex);
  EngineCore core(ex, config);
  std::mt19937 rng(5);
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
    EXPECT_EQ(res.by_request.at(r.request_id)[0].tokens, solo(r, cold_config())[0].tokens) << r.request_id;
  }
  int resumed = 0;
  for (size_t i = requests.size(); i < log.first_chunks.size(); ++i) resumed += log.first_chunks[i].first > 0;
  EXPECT_GT(resumed, 0) << "some preempted sequences skipped their recompute";
}

TEST(PrefixCache, SeededSamplingIsTheSameWithAndWithoutHits) {
  std::mt19937 rng(6);
  const auto prefix = random_prompt(rng, 33, 64);
  EngineConfig config = caching_config();
  FakeExecutor ex;
  EngineCore core(ex, config);
  for (int i = 0; i < 4; ++i) {
    auto r = make_request("s" + std::to_string(i), concat(prefix, random_prompt(rng, 5, 64)), 12, 2);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 99 + i;
    core.add_request(r);
    Results res = run_all(core, {{r.request_id, 2}});
    const auto cold = solo(r, cold_config());
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(res.by_request.at(r.request_id)[static_cast<size_t>(c)].tokens, cold[static_cast<size_t>(c)].tokens)
          << r.request_id << " choice " << c;
    }
  }
  EXPECT_GT(core.stats().prefix_cache_hits, 0u);
}

TEST(PrefixCache, AFailedStepForgetsTheSnapshotsItWasToSave) {
  std::mt19937 rng(7);
  const auto prompt = random_prompt(rng, 40, 64);
  FakeExecutor ex;
  EngineCore core(ex, caching_config());
  core.add_request(make_request("a", prompt, 3));
  core.step();  // [0, 32): the state at 32 is saved by the next step
  ASSERT_EQ(core.scheduler().num_pending_saves(), 1);
  ex.fail_next_step();
  core.step();  // fails before it copies anything
  EXPECT_EQ(core.scheduler().slot_pool().num_snapshots(), 0);
  auto [tokens, cached] = run_one(core, make_request("b", prompt, 3));
  EXPECT_EQ(tokens, solo(make_request("b", prompt, 3), cold_config())[0].tokens);
}

TEST(PrefixCache, AStepWithNothingToComputeStillMakesItsSnapshotCopies) {
  std::mt19937 rng(10);
  const auto prompt = random_prompt(rng, 32, 64);
  FakeExecutor ex;
  std::vector<size_t> seqs_per_step;
  ex.on_step = [&](const StepInput& in) { seqs_per_step.push_back(in.seqs.size()); };
  EngineCore core(ex, caching_config());
  core.add_request(make_request("a", prompt, 5));
  core.step();  // [0, 32): the state at 32 is to be saved by the next step
  ASSERT_EQ(core.scheduler().num_pending_saves(), 1);
  core.abort_request("a");
  core.step();  // nothing runs, but the save is made
  EXPECT_EQ(seqs_per_step, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(core.scheduler().num_pending_saves(), 0);
  const auto b = make_request("b", concat(prompt, random_prompt(rng, 3, 64)), 4);
  auto [tokens, cached] = run_one(core, b);
  EXPECT_EQ(cached, 32);
  EXPECT_EQ(tokens, solo(b, cold_config())[0].tokens);
}

TEST(PrefixCache, ResetIsRefusedWhileRequestsRunUnlessTheyArePreempted) {
  std::mt19937 rng(8);
  const auto prompt = random_prompt(rng, 40, 64);
  FakeExecutor ex;
  EngineCore core(ex, caching_config());
  run_one(core, make_request("a", prompt, 3));
  EXPECT_GT(core.scheduler().slot_pool().num_snapshots(), 0);
  core.add_request(make_request("b", random_prompt(rng, 40, 64), 20));
  core.step();
  EXPECT_FALSE(core.reset_prefix_cache(false));
  EXPECT_TRUE(core.reset_prefix_cache(true));
  EXPECT_EQ(core.scheduler().slot_pool().num_snapshots(), 0);
  EXPECT_EQ(core.scheduler().block_pool().num_cached(), 0);
  EXPECT_EQ(core.scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(core.scheduler().num_running_seqs(), 0);
  Results res = run_all(core, {{"b", 1}});
  EXPECT_EQ(res.by_request.at("b")[0].tokens.size(), 20u) << "the preempted request runs on";
  auto [tokens, cached] = run_one(core, make_request("c", prompt, 3));
  EXPECT_EQ(cached, 0) << "nothing of a's prompt is left";
}

TEST(PrefixCache, OffByConfigItNeverHitsOrSaves) {
  std::mt19937 rng(9);
  const auto prompt = random_prompt(rng, 40, 64);
  FakeExecutor ex;
  ChunkLog log;
  log.attach(ex);
  EngineCore core(ex, cold_config());
  run_one(core, make_request("a", prompt, 3));
  auto [tokens, cached] = run_one(core, make_request("b", prompt, 3));
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(log.state_copies, 0);
  EXPECT_EQ(core.scheduler().slot_pool().num_snapshots(), 0);
  EXPECT_EQ(core.stats().prefix_cache_queries, 0u);
}

}  // namespace
}  // namespace hyllm::testing
