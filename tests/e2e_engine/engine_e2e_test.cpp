// The engine over the real model runner on the CPU backend, with a tiny
// Qwen3.5 checkpoint (bf16): batching, chunking and preemption must not change
// what a request generates.
//
// Exactness needs batch-invariant numerics. The CPU kernels give a row the
// same result whatever else is in the step while a step has at most a few
// rows (GEMV-style paths); larger steps switch to tiled GEMMs whose bf16
// rounding differs by a few hundredths of a logit. So the exact tests use an
// 8-token step budget, and the 32-at-once test allows a divergence only
// where the solo run's top two tokens were nearly tied.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine_core.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "util/log.h"

namespace hyllm {
namespace {

const std::filesystem::path kModelDir =
    std::filesystem::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / "dense_flat_aligned";

// Every step at most 8 tokens: batch-invariant numerics.
EngineConfig exact_config() {
  EngineConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 8;
  c.max_model_len = 96;
  c.block_size = 16;
  c.log_stats_interval_s = 0;
  return c;
}

// 32 sequences at once, prompts prefilled in chunks of the 64-token budget.
EngineConfig wide_config() {
  EngineConfig c = exact_config();
  c.max_num_seqs = 32;
  c.max_num_batched_tokens = 64;
  return c;
}

// A runner and an engine core over it (an executor's cache is allocated once).
struct Engine {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<EngineCore> core;

  explicit Engine(EngineConfig config, std::optional<int> num_blocks = std::nullopt) {
    ModelOptions mo;
    mo.max_num_tokens = config.max_num_batched_tokens;
    mo.max_num_seqs = config.max_num_seqs;
    RunnerOptions ro;
    ro.max_num_tokens = config.max_num_batched_tokens;
    ro.max_num_seqs = config.max_num_seqs;
    ro.max_model_len = config.max_model_len;
    runner = std::make_unique<ModelRunner>(load_model(kModelDir, *backend, mo), ro);
    config.num_gpu_blocks_override = num_blocks;
    core = std::make_unique<EngineCore>(*runner, config);
  }
};

struct Choice {
  std::vector<int32_t> tokens;
  std::vector<float> top2_gap;  // logprob of the best minus the second best, per token
};

// Runs the requests together; results keyed "id#choice".
std::map<std::string, Choice> run_together(EngineCore& core, const std::vector<EngineRequest>& requests) {
  for (const auto& r : requests) {
    core.validate(r);
    core.add_request(r);
  }
  std::map<std::string, Choice> out;
  while (core.has_unfinished_requests()) {
    for (const RequestOutput& o : core.step()) {
      for (const CompletionOutput& c : o.outputs) {
        EXPECT_NE(c.finish_reason, FinishReason::kError) << o.error_message;
        Choice& ch = out[o.request_id + "#" + std::to_string(c.index)];
        ch.tokens.insert(ch.tokens.end(), c.new_token_ids.begin(), c.new_token_ids.end());
        for (const TokenLogprob& lp : c.logprobs) {
          ch.top2_gap.push_back(lp.top_logprobs.size() >= 2 ? lp.top_logprobs[0].second - lp.top_logprobs[1].second
                                                            : 0.0f);
        }
      }
    }
  }
  return out;
}

// Each request alone, one after another in one engine.
std::map<std::string, Choice> run_alone(const EngineConfig& config, const std::vector<EngineRequest>& requests) {
  Engine e(config);
  std::map<std::string, Choice> out;
  for (const auto& r : requests) {
    for (auto& [key, choice] : run_together(*e.core, {r})) out[key] = std::move(choice);
  }
  return out;
}

std::vector<EngineRequest> random_requests(int count, unsigned seed, int vocab, int max_model_len) {
  std::mt19937 rng(seed);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < count; ++i) {
    EngineRequest r;
    r.request_id = "r" + std::to_string(i);
    const int len = 1 + static_cast<int>(rng() % 60);
    for (int t = 0; t < len; ++t) r.prompt_token_ids.push_back(static_cast<int32_t>(rng() % static_cast<unsigned>(vocab)));
    r.sampling.temperature = 0.0f;
    r.sampling.ignore_eos = true;
    r.sampling.logprobs = 2;
    r.sampling.max_tokens = 1 + static_cast<int>(rng() % static_cast<unsigned>(std::min(24, max_model_len - len)));
    reqs.push_back(std::move(r));
  }
  return reqs;
}

class EngineE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { spdlog::set_level(spdlog::level::warn); }
};

TEST_F(EngineE2E, BatchingChunkingAndPreemptionKeepGreedyTokensExact) {
  Engine e(exact_config());
  const auto requests = random_requests(32, 1, e.runner->vocab_size(), exact_config().max_model_len);
  const auto alone = run_alone(exact_config(), requests);
  const auto together = run_together(*e.core, requests);
  Engine tiny(exact_config(), 8);  // 128 tokens of KV for 8 running sequences of up to 84
  const auto preempted = run_together(*tiny.core, requests);
  EXPECT_GT(tiny.core->stats().num_preemptions, 0u);
  for (const auto& r : requests) {
    const std::string key = r.request_id + "#0";
    ASSERT_EQ(alone.at(key).tokens.size(), static_cast<size_t>(r.sampling.max_tokens));
    EXPECT_EQ(together.at(key).tokens, alone.at(key).tokens) << r.request_id;
    EXPECT_EQ(preempted.at(key).tokens, alone.at(key).tokens) << r.request_id << " (preempted)";
  }
  EXPECT_EQ(tiny.core->scheduler().block_pool().num_used(), 0);
  EXPECT_EQ(tiny.core->scheduler().slot_pool().num_used(), 0);
}

// Tokens must match up to the first near-tie in the solo run; after a
// divergence the sequences are different contexts and are not compared.
void expect_same_up_to_near_ties(const std::map<std::string, Choice>& got, const std::map<std::string, Choice>& want,
                                 const std::vector<EngineRequest>& requests, int* near_tie_divergences) {
  constexpr float kNearTie = 0.15f;
  for (const auto& r : requests) {
    const std::string key = r.request_id + "#0";
    const Choice& a = got.at(key);
    const Choice& b = want.at(key);
    ASSERT_EQ(a.tokens.size(), b.tokens.size()) << key;
    for (size_t i = 0; i < a.tokens.size(); ++i) {
      if (a.tokens[i] == b.tokens[i]) continue;
      EXPECT_LT(b.top2_gap[i], kNearTie) << key << " diverges at token " << i << " where the solo run was not tied";
      (*near_tie_divergences)++;
      break;
    }
  }
}

TEST_F(EngineE2E, ThirtyTwoRunningAtOnceMatchTheirSoloRuns) {
  Engine e(wide_config());
  const auto requests = random_requests(32, 2, e.runner->vocab_size(), wide_config().max_model_len);
  const auto alone = run_alone(wide_config(), requests);
  const auto together = run_together(*e.core, requests);
  Engine tiny(wide_config(), 8);
  const auto preempted = run_together(*tiny.core, requests);
  EXPECT_GT(tiny.core->stats().num_preemptions, 0u);
  int near_ties = 0;
  expect_same_up_to_near_ties(together, alone, requests, &near_ties);
  expect_same_up_to_near_ties(preempted, alone, requests, &near_ties);
  EXPECT_LE(near_ties, 10) << "too many near-tie divergences (of 64 compared runs) for bf16 noise";
}

TEST_F(EngineE2E, SeededSamplingIsReproducibleWhateverElseRuns) {
  Engine e(exact_config());
  const int vocab = e.runner->vocab_size();
  EngineRequest seeded;
  seeded.request_id = "seeded";
  seeded.prompt_token_ids = {3, 14, 15, 92, 65, 35};
  seeded.sampling.temperature = 0.9f;
  seeded.sampling.top_p = 0.95f;
  seeded.sampling.top_k = 50;
  seeded.sampling.seed = 2024;
  seeded.sampling.max_tokens = 20;
  seeded.sampling.ignore_eos = true;
  seeded.sampling.n = 2;
  const auto alone = run_together(*e.core, {seeded});

  auto crowd = random_requests(12, 3, vocab, exact_config().max_model_len);
  for (auto& r : crowd) r.sampling.temperature = 1.0f;  // unseeded neighbours
  crowd.push_back(seeded);
  const auto with_crowd = run_together(*e.core, crowd);
  Engine tiny(exact_config(), 8);  // and under preemption
  const auto preempted = run_together(*tiny.core, crowd);
  EXPECT_GT(tiny.core->stats().num_preemptions, 0u);
  for (const char* key : {"seeded#0", "seeded#1"}) {
    ASSERT_EQ(alone.at(key).tokens.size(), 20u);
    EXPECT_EQ(with_crowd.at(key).tokens, alone.at(key).tokens) << key;
    EXPECT_EQ(preempted.at(key).tokens, alone.at(key).tokens) << key;
  }
  EXPECT_NE(alone.at("seeded#0").tokens, alone.at("seeded#1").tokens) << "choices use different seeds";
}

}  // namespace
}  // namespace hyllm
