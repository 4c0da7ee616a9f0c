#pragma once
// Helpers for driving an EngineCore over a FakeExecutor.

#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "fake_executor.h"

namespace hyllm::testing {

struct ChoiceResult {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
  StopReason stop_reason;
  std::string text;
  int outputs = 0;  // CompletionOutputs received
};

struct Results {
  std::map<std::string, std::vector<ChoiceResult>> by_request;
  int steps = 0;

  void add(const RequestOutput& out, int n) {
    auto& choices = by_request[out.request_id];
    if (choices.empty()) choices.resize(static_cast<size_t>(n));
    for (const CompletionOutput& c : out.outputs) {
      ChoiceResult& r = choices.at(static_cast<size_t>(c.index));
      r.tokens.insert(r.tokens.end(), c.new_token_ids.begin(), c.new_token_ids.end());
      r.text += c.text;
      r.outputs++;
      if (c.finished()) {
        r.finish = c.finish_reason;
        r.stop_reason = c.stop_reason;
      }
    }
  }
};

inline EngineRequest make_request(std::string id, std::vector<int32_t> prompt, int max_tokens, int n = 1) {
  EngineRequest r;
  r.request_id = std::move(id);
  r.prompt_token_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.n = n;
  return r;
}

inline std::vector<int32_t> random_prompt(std::mt19937& rng, int len, int vocab) {
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = tok(rng);
  return p;
}

// Steps until every request finished; outputs are checked to carry at most
// one new token per choice per step (unless jump_forward: a structured-output
// constraint may append forced tokens after the sampled one).
inline Results run_all(EngineCore& core, const std::map<std::string, int>& n_of, int max_steps = 100000,
                       bool jump_forward = false) {
  Results res;
  while (core.has_unfinished_requests() && res.steps < max_steps) {
    for (const RequestOutput& out : core.step()) {
      for (const CompletionOutput& c : out.outputs) {
        if (c.new_token_ids.size() > 1 && !jump_forward) throw std::logic_error("outputs were merged");
      }
      res.add(out, n_of.at(out.request_id));
    }
    res.steps++;
  }
  return res;
}

inline EngineConfig small_config() {
  EngineConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 128;
  c.block_size = 4;
  c.log_stats_interval_s = 0;
  return c;
}

// The tokens each choice of `request` produces alone in a large cache.
inline std::vector<ChoiceResult> solo(const EngineRequest& request, EngineConfig config) {
  FakeExecutor ex;
  config.kv_cache_memory_bytes.reset();
  config.max_num_seqs = std::max(config.max_num_seqs, request.sampling.n);
  config.max_num_batched_tokens = std::max(config.max_num_batched_tokens, config.max_num_seqs);
  EngineCore core(ex, config);
  core.add_request(request);
  Results r = run_all(core, {{request.request_id, request.sampling.n}});
  return r.by_request.at(request.request_id);
}

}  // namespace hyllm::testing
