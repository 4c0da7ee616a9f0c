// The engine over a runner that pads its decode steps to capture sizes, as
// it does when steps are replayed from device graphs (forced here on the CPU
// backend, RunnerOptions::pad_decode_steps): greedy and seeded-sampled
// tokens and their logprobs equal the unpadded engine's exactly, with n > 1,
// and the reserved block and slot stay out of the pools and their counts.

#include <gtest/gtest.h>

#include "engine_e2e_util.h"
#include "util/log.h"

namespace hyllm::e2e {
namespace {

class DecodePaddingE2E : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() { spdlog::set_level(spdlog::level::warn); }
};

TEST_P(DecodePaddingE2E, PaddedEngineGivesTheUnpaddedTokensAndLogprobs) {
  const auto model = std::filesystem::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / GetParam();
  EngineConfig config = wide_config();
  config.enable_prefix_caching = true;
  Engine plain(config, std::nullopt, false, model);
  Engine padded(config, std::nullopt, true, model);
  auto requests = random_requests(24, 11, plain.runner->vocab_size(), config.max_model_len);
  for (size_t i = 0; i < requests.size(); i += 3) {
    requests[i].sampling.n = 2;
    requests[i].sampling.temperature = 0.8f;
    requests[i].sampling.seed = 100 + static_cast<int>(i);
  }
  const auto want = run_together(*plain.core, requests);
  const auto got = run_together(*padded.core, requests);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [key, choice] : want) {
    EXPECT_EQ(got.at(key).tokens, choice.tokens) << key;
    EXPECT_EQ(got.at(key).logprobs, choice.logprobs) << key;
  }
  EXPECT_EQ(plain.runner->padding_seqs(), 0);
  EXPECT_GT(padded.runner->padding_seqs(), 0);

  const EngineStats p = plain.core->stats(), q = padded.core->stats();
  EXPECT_EQ(q.num_state_slots, p.num_state_slots) << "the reserved slot comes on top of the pool";
  EXPECT_LT(q.num_kv_blocks, p.num_kv_blocks) << "the reserved block and slot cost pool blocks";
  EXPECT_EQ(q.kv_capacity_tokens, int64_t{q.num_kv_blocks} * config.block_size);
  EXPECT_EQ(padded.core->scheduler().block_pool().num_blocks(), q.num_kv_blocks);
  EXPECT_EQ(padded.core->scheduler().slot_pool().num_slots(), q.num_state_slots);
  EXPECT_EQ(padded.core->scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(q.num_requests_running, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, DecodePaddingE2E, ::testing::Values("dense_flat_aligned", "moe_flat_fused"));

}  // namespace
}  // namespace hyllm::e2e
