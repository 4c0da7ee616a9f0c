// The runner's cache copies, which fork choices and save and restore prefix
// cache snapshots: a step may hold copies only, and a sequence continued
// from a copied state slot and copied KV blocks sees the same logits as the
// sequence it was copied from.

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "runner_test_util.h"

namespace hyllm {
namespace {

SeqWork work(int64_t id, std::span<const int32_t> tokens, int32_t start, std::span<const int32_t> table, int32_t slot,
             const SamplingParams& greedy) {
  SeqWork w;
  w.seq_id = id;
  w.token_ids = tokens;
  w.start_pos = start;
  w.block_table = table;
  w.state_slot = slot;
  w.sample = true;
  w.sampling = &greedy;
  return w;
}

TEST(CacheCopies, ACopiedSlotAndBlockContinueExactlyAndCopiesMayRunAlone) {
  auto backend = make_cpu_backend();
  ModelRunner runner(load_model(test::tiny_model(), *backend, test::small_model_options()), test::small_runner_options());
  runner.allocate_cache({16, 8, 4});
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> prompt = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30};
  const std::vector<int32_t> table_a = {0, 1}, table_b = {0, 2};  // block 0 shared, block 1 copied to 2

  StepInput prefill;
  prefill.seqs.push_back(work(1, prompt, 0, table_a, 0, greedy));
  runner.execute(prefill);

  StepInput copies;  // no sequences: only the copies run
  copies.kv_block_copies = {{1, 2}};
  copies.state_slot_copies = {{0, 3}};
  EXPECT_TRUE(runner.execute(copies).sampled.empty());

  const std::vector<int32_t> next = {42};
  StepInput a, b;
  a.seqs.push_back(work(1, next, 20, table_a, 0, greedy));
  runner.execute(a);
  const std::vector<float> logits_a = runner.last_logits();
  b.seqs.push_back(work(2, next, 20, table_b, 3, greedy));
  runner.execute(b);
  EXPECT_EQ(runner.last_logits(), logits_a);

  // Without the copies the continuation differs: the check can fail.
  StepInput c;
  c.seqs.push_back(work(3, next, 20, table_b, 1, greedy));
  runner.execute(c);
  EXPECT_NE(runner.last_logits(), logits_a);
}

}  // namespace
}  // namespace hyllm
