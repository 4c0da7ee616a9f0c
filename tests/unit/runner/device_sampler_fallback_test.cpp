// The runner samples a step on its DeviceSampler unless a row asks for what
// the device sampler does not do (a logit_bias, or more top logprobs than it
// returns): then the whole step samples on the host, with the host sampler's
// semantics. A fake device sampler over the CPU backend's host logits
// records which steps reached it.

#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_sampler.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "runner_test_util.h"

namespace hyllm {
namespace {

// Greedy over the rows it is given, whatever their parameters say: a step
// that reached it shows in `calls` and in tokens that ignore any bias.
class CountingSampler : public DeviceSampler {
 public:
  int calls = 0;
  std::vector<DeviceSampledToken> sample(const TensorView& logits, std::span<const DeviceSamplingRow> rows) override {
    ++calls;
    const int64_t V = logits.dim(1);
    std::vector<DeviceSampledToken> out(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* row = logits.data_as<const float>() + static_cast<int64_t>(r) * V;
      out[r].token = static_cast<int32_t>(std::max_element(row, row + V) - row);
    }
    return out;
  }
};

struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::shared_ptr<CountingSampler> sampler = std::make_shared<CountingSampler>();
  std::unique_ptr<ModelRunner> runner;
  std::vector<int32_t> prompt{5, 17, 42, 9};
  std::vector<int32_t> table{0, 1};

  Fixture() {
    RunnerOptions ro = test::small_runner_options();
    ro.device_sampler = sampler;
    runner = std::make_unique<ModelRunner>(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
    const CacheLayout layout = runner->cache_layout();
    runner->allocate_cache({.block_size = 16,
                            .num_blocks = 2 + layout.reserved_blocks,
                            .num_state_slots = 1 + layout.reserved_state_slots});
  }
  // The prompt's prefill step, sampled with `params`.
  SampledToken prefill(const SamplingParams& params) {
    StepInput in;
    SeqWork w;
    w.seq_id = 0;
    w.token_ids = prompt;
    w.block_table = table;
    w.state_slot = 0;
    w.sample = true;
    w.sampling = &params;
    w.prompt_ids = prompt;
    in.seqs.push_back(w);
    StepOutput out = runner->execute(in);
    EXPECT_EQ(out.sampled.size(), 1u);
    return out.sampled.at(0);
  }
};

TEST(DeviceSamplerFallback, ALogitBiasSamplesTheStepOnTheHost) {
  Fixture f;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const int32_t plain = f.prefill(greedy).token;
  EXPECT_EQ(f.sampler->calls, 1);

  // A bias large enough to move the argmax to another token: only the host
  // sampler applies it, and the device sampler is not asked.
  SamplingParams biased = greedy;
  const int32_t other = plain == 3 ? 4 : 3;
  biased.logit_bias = {{other, 100.0f}};
  EXPECT_EQ(f.prefill(biased).token, other);
  EXPECT_EQ(f.sampler->calls, 1);

  // Back to the device sampler once no row has a bias.
  EXPECT_EQ(f.prefill(greedy).token, plain);
  EXPECT_EQ(f.sampler->calls, 2);
}

}  // namespace
}  // namespace hyllm
