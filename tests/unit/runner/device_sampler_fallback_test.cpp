// The runner samples a step's rows on its DeviceSampler, but for rows that
// ask for what the device sampler does not do (a logit_bias, or more top
// logprobs than it returns): those rows alone are sampled again on the host,
// with the host sampler's semantics, from a copy of their logits. A fake
// device sampler over the CPU backend's host logits records what reached it.

#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_sampler.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "runner_test_util.h"

namespace hyllm {
namespace {

struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::shared_ptr<test::GreedyDeviceSampler> sampler = std::make_shared<test::GreedyDeviceSampler>();
  std::unique_ptr<ModelRunner> runner;
  std::vector<int32_t> prompt{5, 17, 42, 9};
  std::vector<std::vector<int32_t>> tables{{0, 1}, {2, 3}};

  Fixture() {
    RunnerOptions ro = test::small_runner_options();
    ro.device_sampler = sampler;
    runner = std::make_unique<ModelRunner>(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
    const CacheLayout layout = runner->cache_layout();
    runner->allocate_cache({.block_size = 16,
                            .num_blocks = 4 + layout.reserved_blocks,
                            .num_state_slots = 2 + layout.reserved_state_slots});
  }
  // One prefill step of the prompt per entry of `params` (a sequence each),
  // returning the sampled tokens.
  std::vector<int32_t> prefill(std::vector<const SamplingParams*> params) {
    StepInput in;
    for (size_t s = 0; s < params.size(); ++s) {
      SeqWork w;
      w.seq_id = static_cast<int64_t>(s);
      w.token_ids = prompt;
      w.block_table = tables[s];
      w.state_slot = static_cast<int32_t>(s);
      w.sample = true;
      w.sampling = params[s];
      w.prompt_ids = prompt;
      in.seqs.push_back(w);
    }
    StepOutput out = runner->execute(in);
    EXPECT_EQ(out.sampled.size(), params.size());
    std::vector<int32_t> tokens;
    for (const SampledToken& t : out.sampled) tokens.push_back(t.token);
    return tokens;
  }
};

TEST(DeviceSamplerFallback, OnlyTheRowsWithALogitBiasSampleOnTheHost) {
  Fixture f;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const int32_t plain = f.prefill({&greedy}).at(0);
  EXPECT_EQ(f.sampler->calls, 1);

  // A bias large enough to move the argmax to another token. The step still
  // reaches the device sampler (for its other row), whose token for the
  // biased row, which ignores the bias, the host sampler's replaces.
  SamplingParams biased = greedy;
  const int32_t other = plain == 3 ? 4 : 3;
  biased.logit_bias = {{other, 100.0f}};
  EXPECT_EQ(f.prefill({&biased, &greedy}), (std::vector<int32_t>{other, plain}));
  EXPECT_EQ(f.sampler->calls, 2);
  EXPECT_EQ(f.prefill({&greedy, &biased}), (std::vector<int32_t>{plain, other}));
  EXPECT_EQ(f.sampler->calls, 3);
}

}  // namespace
}  // namespace hyllm
