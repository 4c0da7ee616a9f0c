#pragma once
// The engine over the real model runner on the CPU backend, with a tiny
// Qwen3.5 checkpoint: what the e2e engine tests share.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine_core.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"

namespace hyllm::e2e {

inline const std::filesystem::path kModelDir =
    std::filesystem::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / "dense_flat_aligned";

// Every step at most 8 tokens: many chunk boundaries and mixed steps.
inline EngineConfig exact_config() {
  EngineConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 8;
  c.max_model_len = 96;
  c.block_size = 16;
  c.log_stats_interval_s = 0;
  // Thousands of tokens for the tiny model: allocating and zeroing the CPU
  // backend's default 1 GiB would take most of a test's time.
  c.kv_cache_memory_bytes = size_t{32} << 20;
  return c;
}

// 32 sequences at once, prompts prefilled in chunks of the 64-token budget.
inline EngineConfig wide_config() {
  EngineConfig c = exact_config();
  c.max_num_seqs = 32;
  c.max_num_batched_tokens = 64;
  return c;
}

// The model's and the runner's capacities for an engine of `config` (and
// its number of speculative tokens).
inline ModelOptions model_options(const EngineConfig& config) {
  ModelOptions mo;
  mo.max_num_tokens = config.max_num_batched_tokens;
  mo.max_num_seqs = config.max_num_seqs;
  mo.num_speculative_tokens = config.num_speculative_tokens;
  return mo;
}

inline RunnerOptions runner_options(const EngineConfig& config) {
  RunnerOptions ro;
  ro.max_num_tokens = config.max_num_batched_tokens;
  ro.max_num_seqs = config.max_num_seqs;
  ro.max_model_len = config.max_model_len;
  return ro;
}

// A runner and an engine core over it (an executor's cache is allocated once).
struct Engine {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<EngineCore> core;

  // pad_decode_steps: decode steps padded to capture sizes as with device graphs (RunnerOptions).
  explicit Engine(EngineConfig config, std::optional<int> num_blocks = std::nullopt, bool pad_decode_steps = false,
                  const std::filesystem::path& model_dir = kModelDir) {
    RunnerOptions ro = runner_options(config);
    ro.pad_decode_steps = pad_decode_steps;
    runner = std::make_unique<ModelRunner>(load_model(model_dir, *backend, model_options(config)), ro);
    config.num_gpu_blocks_override = num_blocks;
    core = std::make_unique<EngineCore>(*runner, config);
  }
};

struct Choice {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;  // per token, best first
  int num_cached_tokens = 0;
};

// Runs the requests together; results keyed "id#choice".
inline std::map<std::string, Choice> run_together(EngineCore& core, const std::vector<EngineRequest>& requests) {
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
        for (const TokenLogprob& l : c.logprobs) {
          ch.logprobs.push_back(l.logprob);
          ch.top_logprobs.push_back(l.top_logprobs);
        }
        ch.num_cached_tokens = o.num_cached_tokens;
      }
    }
  }
  return out;
}

// Each request alone, one after another in one engine.
inline std::map<std::string, Choice> run_alone(const EngineConfig& config, const std::vector<EngineRequest>& requests) {
  Engine e(config);
  std::map<std::string, Choice> out;
  for (const auto& r : requests) {
    for (auto& [key, choice] : run_together(*e.core, {r})) out[key] = std::move(choice);
  }
  return out;
}

inline std::vector<EngineRequest> random_requests(int count, unsigned seed, int vocab, int max_model_len) {
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

}  // namespace hyllm::e2e
