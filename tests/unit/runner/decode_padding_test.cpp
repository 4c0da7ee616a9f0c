// Decode steps padded to capture sizes (model_runner.h), forced on the CPU
// backend with RunnerOptions::pad_decode_steps: a padded step's real rows
// have exactly the unpadded step's logits and tokens (the CPU kernels are
// batch invariant, so any leak of a padding row into a real one shows), and
// the reserved KV block and state slot are the runner's alone.

#include <gtest/gtest.h>

#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "runner_test_util.h"
#include "util/status.h"

namespace hyllm {
namespace {

std::filesystem::path tiny(const char* name) {
  return std::filesystem::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / name;
}

struct Trace {
  std::vector<std::vector<int32_t>> tokens;  // per sequence: prompt, then sampled
  std::vector<std::vector<float>> logits;    // per step: every sampled row
  int64_t padding_seqs = 0;
};

// Six sequences with prompts of different lengths, finishing at different
// steps, so that decode steps have 6, 5, 3, 2 and 1 sequences (padded to 8,
// 8, 4, 2, 1). Sequence 5's prompt arrives one token per step while the
// others decode, so some decode steps have a sequence that samples nothing.
Trace run(const std::filesystem::path& model, bool pad) {
  auto be = make_cpu_backend();
  RunnerOptions ro = test::small_runner_options();
  ro.pad_decode_steps = pad;
  ModelRunner runner(load_model(model, *be, test::small_model_options()), ro);
  const CacheLayout layout = runner.cache_layout();
  constexpr int kSeqs = 6, kBlocksPerSeq = 4;
  runner.allocate_cache({.block_size = 16,
                         .num_blocks = kSeqs * kBlocksPerSeq + layout.reserved_blocks,
                         .num_state_slots = kSeqs + layout.reserved_state_slots});
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const int32_t V = runner.vocab_size();
  Trace t;
  t.tokens = {{5, 17, 300 % V, 42}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 100, 200 % V}, {77}, {1, 2}, {3}, {11, 12, 13, 14, 15}};
  const std::vector<size_t> prompt_len = {4, 11, 1, 2, 1, 5};
  const std::vector<int> last_step = {9, 14, 5, 3, 1, 12};
  std::vector<std::vector<int32_t>> tables(kSeqs);
  for (int s = 0; s < kSeqs; ++s)
    for (int b = 0; b < kBlocksPerSeq; ++b) tables[s].push_back(s * kBlocksPerSeq + b);
  std::vector<size_t> done(kSeqs, 0);  // tokens in the cache
  for (int step = 0; step < 16; ++step) {
    StepInput in;
    std::vector<size_t> sampled;
    for (size_t s = 0; s < kSeqs; ++s) {
      if (step > last_step[s]) continue;
      SeqWork w;
      w.seq_id = static_cast<int64_t>(s);
      // Sequence 5 prefills one token a step; the others take their whole prompt at once.
      const size_t n = s == 5 && done[s] < prompt_len[s] ? 1 : t.tokens[s].size() - done[s];
      w.token_ids = std::span<const int32_t>(t.tokens[s]).subspan(done[s], n);
      w.start_pos = static_cast<int32_t>(done[s]);
      w.block_table = tables[s];
      w.state_slot = static_cast<int32_t>(s);
      w.sample = done[s] + n == t.tokens[s].size();
      w.sampling = &greedy;
      w.prompt_ids = std::span<const int32_t>(t.tokens[s]).first(prompt_len[s]);
      done[s] += n;
      in.seqs.push_back(w);
      if (w.sample) sampled.push_back(s);
    }
    if (in.seqs.empty()) break;
    StepOutput out = runner.execute(in);
    EXPECT_EQ(out.sampled.size(), sampled.size());
    EXPECT_EQ(runner.last_logits().size(), sampled.size() * static_cast<size_t>(V));
    t.logits.push_back(runner.last_logits());
    for (size_t i = 0; i < sampled.size(); ++i) t.tokens[sampled[i]].push_back(out.sampled.at(i).token);
  }
  t.padding_seqs = runner.padding_seqs();
  return t;
}

class DecodePadding : public ::testing::TestWithParam<const char*> {};

TEST_P(DecodePadding, PaddedStepsGiveTheUnpaddedRowsExactly) {
  const Trace plain = run(tiny(GetParam()), false);
  const Trace padded = run(tiny(GetParam()), true);
  EXPECT_EQ(plain.padding_seqs, 0);
  EXPECT_GT(padded.padding_seqs, 4);
  EXPECT_EQ(padded.tokens, plain.tokens);
  ASSERT_EQ(padded.logits.size(), plain.logits.size());
  for (size_t step = 0; step < plain.logits.size(); ++step) EXPECT_EQ(padded.logits[step], plain.logits[step]) << step;
}

INSTANTIATE_TEST_SUITE_P(Models, DecodePadding, ::testing::Values("dense_flat_aligned", "moe_flat_fused"));

TEST(DecodePadding, RunnerReservesOneBlockAndSlotOnlyWhenItPads) {
  auto be = make_cpu_backend();
  RunnerOptions ro = test::small_runner_options();
  ModelRunner plain(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
  EXPECT_EQ(plain.cache_layout().reserved_blocks, 0);
  EXPECT_EQ(plain.cache_layout().reserved_state_slots, 0);
  ro.pad_decode_steps = true;
  ModelRunner runner(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
  EXPECT_EQ(runner.cache_layout().reserved_blocks, 1);
  EXPECT_EQ(runner.cache_layout().reserved_state_slots, 1);
  RunnerOptions one = ro;  // a runner of one sequence adds no padding sequence
  one.max_num_seqs = 1;
  ModelRunner single(load_model(test::tiny_model(), *be, test::small_model_options()), one);
  EXPECT_EQ(single.cache_layout().reserved_blocks, 0);
  EXPECT_EQ(single.cache_layout().reserved_state_slots, 0);
  EXPECT_THROW(runner.allocate_cache({.block_size = 16, .num_blocks = 1, .num_state_slots = 4}), Error);
  EXPECT_THROW(runner.allocate_cache({.block_size = 16, .num_blocks = 8, .num_state_slots = 1}), Error);
  runner.allocate_cache({.block_size = 16, .num_blocks = 8, .num_state_slots = 4});

  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> tokens = {5, 6, 7};
  auto step = [&](std::vector<int32_t> table, int32_t slot) {
    StepInput in;
    SeqWork w;
    w.token_ids = tokens;
    w.block_table = table;
    w.state_slot = slot;
    w.sample = true;
    w.sampling = &greedy;
    in.seqs.push_back(w);
    return runner.execute(in);
  };
  // Block 7 and slot 3 are the reserved ones: a sequence given either is the engine's bug.
  EXPECT_THROW(step({7}, 0), Error);
  EXPECT_THROW(step({0}, 3), Error);
  EXPECT_EQ(step({6}, 2).sampled.size(), 1u);
}

}  // namespace
}  // namespace hyllm
