// Speculative decoding with the MTP head on the CPU backend: the tokens must
// be exactly those of decoding without it, for k = 1..4, alone and with
// concurrent requests, across chunked prefill, preemption and prefix caching,
// greedy and seeded sampling alike (executor.h explains why sampling is
// exact too). The drafts come from a random MTP head, so most are rejected
// and the GDN rollback runs nearly every step; some are accepted (short
// repetitive continuations of the tiny model), which the counters show.

#include <gtest/gtest.h>

#include <numeric>

#include "engine_e2e_util.h"
#include "mtp_model.h"
#include "util/log.h"

namespace hyllm::e2e {
namespace {

// The engine over a model directory with speculative decoding set to k (0 off).
struct SpecEngine {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<EngineCore> core;

  SpecEngine(const std::filesystem::path& dir, EngineConfig config, int k, std::optional<int> num_blocks = {},
             GraphRecorder recorder = nullptr, bool profile = false) {
    config.num_speculative_tokens = k;
    RunnerOptions ro = runner_options(config);
    ro.record_graph = std::move(recorder);
    runner = std::make_unique<ModelRunner>(load_model(dir, *backend, model_options(config)), ro);
    if (profile) runner->profile_run();  // what a device runner does before sizing its cache
    config.num_gpu_blocks_override = num_blocks;
    core = std::make_unique<EngineCore>(*runner, config);
  }
};

class SpecDecodeE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    spdlog::set_level(spdlog::level::warn);
    flat_ = new std::filesystem::path(write_mtp_model("flat", false));
    nested_ = new std::filesystem::path(write_mtp_model("nested", true));
    repeater_ = new std::filesystem::path(write_mtp_model("repeater", false, /*echo=*/true, /*repeater=*/true));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*flat_);
    std::filesystem::remove_all(*nested_);
    std::filesystem::remove_all(*repeater_);
    delete flat_;
    delete nested_;
    delete repeater_;
  }
  static std::filesystem::path* flat_;
  static std::filesystem::path* nested_;
  static std::filesystem::path* repeater_;
};
std::filesystem::path* SpecDecodeE2E::flat_ = nullptr;
std::filesystem::path* SpecDecodeE2E::nested_ = nullptr;
std::filesystem::path* SpecDecodeE2E::repeater_ = nullptr;

void expect_same_tokens(const std::vector<EngineRequest>& requests, const std::map<std::string, Choice>& want,
                        const std::map<std::string, Choice>& got, const std::string& what) {
  for (const auto& r : requests) {
    for (int c = 0; c < r.sampling.n; ++c) {
      const std::string key = r.request_id + "#" + std::to_string(c);
      ASSERT_TRUE(got.count(key)) << key << " " << what;
      EXPECT_EQ(got.at(key).tokens, want.at(key).tokens) << key << " " << what;
      ASSERT_EQ(got.at(key).logprobs.size(), want.at(key).logprobs.size()) << key << " " << what;
      for (size_t i = 0; i < want.at(key).logprobs.size(); ++i)
        EXPECT_EQ(got.at(key).logprobs[i], want.at(key).logprobs[i]) << key << " token " << i << " " << what;
    }
  }
}

TEST_F(SpecDecodeE2E, GreedyTokensMatchDecodingWithoutSpeculationForEveryK) {
  SpecEngine plain(*flat_, exact_config(), 0);
  const auto requests = random_requests(12, 5, plain.runner->vocab_size(), exact_config().max_model_len);
  const auto want = run_together(*plain.core, requests);
  EXPECT_GT(plain.runner->times().steps, 0);
  EXPECT_EQ(plain.runner->times().draft_s, 0.0);  // no MTP passes without speculation
  for (int k = 1; k <= 4; ++k) {
    SpecEngine alone_engine(*flat_, exact_config(), k);
    std::map<std::string, Choice> alone;
    for (const auto& r : requests) {
      for (auto& [key, choice] : run_together(*alone_engine.core, {r})) alone[key] = std::move(choice);
    }
    expect_same_tokens(requests, want, alone, "alone, k=" + std::to_string(k));
    SpecEngine together_engine(*flat_, exact_config(), k);
    expect_same_tokens(requests, want, run_together(*together_engine.core, requests),
                       "together, k=" + std::to_string(k));
    const EngineStats s = together_engine.core->stats();
    EXPECT_GT(s.spec_num_drafts, 0u) << k;
    EXPECT_GE(s.spec_num_draft_tokens, s.spec_num_drafts) << k;
    EXPECT_LE(s.spec_num_accepted_tokens, s.spec_num_draft_tokens) << k;
    ASSERT_EQ(s.spec_accepted_per_pos.size(), static_cast<size_t>(k));
    uint64_t per_pos = 0;
    for (uint64_t a : s.spec_accepted_per_pos) per_pos += a;
    EXPECT_EQ(per_pos, s.spec_num_accepted_tokens) << k;
    // The runner's time split: generation steps timed (prefill steps not),
    // the drafts a part of each.
    const ExecutorTimes t = together_engine.runner->times();
    EXPECT_GT(t.steps, 0) << k;
    EXPECT_LT(t.steps, static_cast<int64_t>(s.num_steps)) << k;
    EXPECT_GT(t.draft_s, 0.0) << k;
    EXPECT_GT(t.target_s, 0.0) << k;
    EXPECT_EQ(together_engine.core->scheduler().block_pool().num_used(), 0);
    EXPECT_EQ(together_engine.core->scheduler().slot_pool().num_used(), 0);
  }
}

TEST_F(SpecDecodeE2E, ThirtyTwoConcurrentWithPreemptionMatch) {
  SpecEngine plain(*flat_, wide_config(), 0);
  const auto requests = random_requests(32, 6, plain.runner->vocab_size(), wide_config().max_model_len);
  const auto want = run_together(*plain.core, requests);
  for (int k : {2, 4}) {
    SpecEngine wide(*flat_, wide_config(), k);
    expect_same_tokens(requests, want, run_together(*wide.core, requests), "wide, k=" + std::to_string(k));
    SpecEngine tiny(*flat_, wide_config(), k, 10);  // 160 tokens of KV: preemption
    expect_same_tokens(requests, want, run_together(*tiny.core, requests), "preempted, k=" + std::to_string(k));
    EXPECT_GT(tiny.core->stats().num_preemptions, 0u) << k;
    EXPECT_EQ(tiny.core->scheduler().block_pool().num_used(), 0);
  }
}

TEST_F(SpecDecodeE2E, SeededSamplingAndStopsMatchToo) {
  SpecEngine plain(*nested_, exact_config(), 0);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.request_id = "s" + std::to_string(i);
    r.prompt_token_ids = {3, 14, 15, 92, 65, 35, static_cast<int32_t>(i)};
    r.sampling.temperature = 0.8f;
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.9f;
    r.sampling.seed = 100 + i;
    r.sampling.max_tokens = 24;
    r.sampling.min_tokens = 3;
    r.sampling.n = i % 2 + 1;
    r.sampling.repetition_penalty = i == 2 ? 1.3f : 1.0f;
    r.sampling.stop_token_ids = {7, 11};
    r.sampling.logprobs = 1;
    requests.push_back(std::move(r));
  }
  // Repeating prompts: the tiny model continues them, so some drafts are accepted.
  for (int i = 0; i < 4; ++i) {
    EngineRequest r;
    r.request_id = "g" + std::to_string(i);
    for (int t = 0; t < 30; ++t) r.prompt_token_ids.push_back(static_cast<int32_t>((t * (i + 2)) % 9 + 20));
    r.sampling.temperature = 0.0f;
    r.sampling.ignore_eos = true;
    r.sampling.max_tokens = 40;
    requests.push_back(std::move(r));
  }
  const auto want = run_together(*plain.core, requests);
  EXPECT_GT(plain.runner->times().steps, 0);
  EXPECT_EQ(plain.runner->times().draft_s, 0.0);  // no MTP passes without speculation
  for (int k = 1; k <= 4; ++k) {
    SpecEngine spec(*nested_, exact_config(), k);
    expect_same_tokens(requests, want, run_together(*spec.core, requests), "k=" + std::to_string(k));

  }
}

TEST_F(SpecDecodeE2E, AcceptedDraftsEmitSeveralTokensPerStepAndStillMatch) {
  // The repeater model with the echo head: greedy drafts are right, hot
  // sampling rejects some, so steps accept 0..k drafts and roll back to any of them.
  std::vector<EngineRequest> requests = random_requests(8, 9, 256, exact_config().max_model_len);
  for (size_t i = 0; i < requests.size(); ++i) {
    EngineRequest& r = requests[i];
    r.sampling.max_tokens = 30;
    r.sampling.logprobs.reset();
    if (i % 2 == 1) {
      r.sampling.temperature = 1.0f;  // the repeater's logits are flat enough to wander
      r.sampling.seed = 7 + i;
    }
  }
  SpecEngine plain(*repeater_, exact_config(), 0);
  const auto want = run_together(*plain.core, requests);
  EXPECT_GT(plain.runner->times().steps, 0);
  EXPECT_EQ(plain.runner->times().draft_s, 0.0);  // no MTP passes without speculation
  for (int k = 1; k <= 4; ++k) {
    SpecEngine spec(*repeater_, exact_config(), k);
    expect_same_tokens(requests, want, run_together(*spec.core, requests), "k=" + std::to_string(k));
    const EngineStats s = spec.core->stats();
    EXPECT_GT(s.spec_num_accepted_tokens, s.spec_num_draft_tokens / 4) << k;
    EXPECT_LT(s.spec_num_accepted_tokens, s.spec_num_draft_tokens) << k;
    EXPECT_EQ(std::accumulate(s.spec_accepted_per_pos.begin(), s.spec_accepted_per_pos.end(), uint64_t{0}),
              s.spec_num_accepted_tokens) << k;
    for (int j = 1; j < k; ++j) EXPECT_LE(s.spec_accepted_per_pos[j], s.spec_accepted_per_pos[j - 1]) << k;
    EXPECT_EQ(s.generation_tokens, plain.core->stats().generation_tokens) << k;
  }
}

// A stand-in for CUDA graphs on the CPU: replaying calls the recorded body
// again, with the StepContext it captured (whose views point into the
// runner's fixed buffers, as a device graph's addresses do).
class ReplayByCalling final : public DeviceGraph {
 public:
  explicit ReplayByCalling(std::function<void()> body) : body_(std::move(body)) {}
  void replay() override { body_(); }
  bool valid() const override { return true; }

 private:
  std::function<void()> body_;
};

TEST_F(SpecDecodeE2E, VerifyStepsReplayedFromGraphsMatch) {
  GraphRecorder recorder = [](const std::function<void()>& body) -> std::unique_ptr<DeviceGraph> {
    return std::make_unique<ReplayByCalling>(body);
  };
  // A budget that fits every sequence's drafts, so that steps are uniform
  // once the prompts are in.
  EngineConfig config = wide_config();
  config.max_num_batched_tokens = 160;
  SpecEngine plain(*repeater_, config, 0);
  std::vector<EngineRequest> requests = random_requests(8, 12, 256, config.max_model_len);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].sampling.max_tokens = std::min<int>(40, config.max_model_len - static_cast<int>(requests[i].prompt_token_ids.size()));
    if (i % 3 == 0) {
      requests[i].sampling.temperature = 1.0f;
      requests[i].sampling.seed = 40 + i;
    }
  }
  const auto want = run_together(*plain.core, requests);
  for (int k : {2, 4}) {
    SpecEngine spec(*repeater_, config, k, std::nullopt, recorder);
    expect_same_tokens(requests, want, run_together(*spec.core, requests), "graphs, k=" + std::to_string(k));
    EXPECT_GT(spec.runner->graph_replays(), 0) << k;
    EXPECT_GT(spec.core->stats().spec_num_accepted_tokens, 0u) << k;
  }
}

// The memory profile step samples 1 + K rows per sequence when speculating
// (so that a device sampler's scratch is sized for verify steps); the engine
// then runs as usual.
TEST_F(SpecDecodeE2E, ProfileRunThenDecodeMatches) {
  SpecEngine plain(*flat_, wide_config(), 0);
  const auto requests = random_requests(6, 13, plain.runner->vocab_size(), wide_config().max_model_len);
  const auto want = run_together(*plain.core, requests);
  SpecEngine spec(*flat_, wide_config(), 4, std::nullopt, nullptr, /*profile=*/true);
  expect_same_tokens(requests, want, run_together(*spec.core, requests), "after profile_run");
}

TEST_F(SpecDecodeE2E, MoeModelWithAnMoeHeadMatchesToo) {
  const auto dir = write_mtp_model("moe", true, false, false,
                                   std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/tiny_models/moe_flat_fused");
  SpecEngine plain(dir, exact_config(), 0);
  const auto requests = random_requests(8, 11, plain.runner->vocab_size(), exact_config().max_model_len);
  const auto want = run_together(*plain.core, requests);
  for (int k : {1, 3}) {
    SpecEngine spec(dir, exact_config(), k);
    expect_same_tokens(requests, want, run_together(*spec.core, requests), "moe, k=" + std::to_string(k));
    EXPECT_GT(spec.core->stats().spec_num_drafts, 0u);
  }
  std::filesystem::remove_all(dir);
}

TEST_F(SpecDecodeE2E, ACheckpointWithoutAnMtpHeadIsRefusedClearly) {
  EngineConfig c = exact_config();
  try {
    SpecEngine e(kModelDir, c, 2);
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("MTP head"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hyllm::e2e
