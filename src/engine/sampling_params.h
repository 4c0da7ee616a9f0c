#pragma once
// Per-request sampling and stopping parameters, with vLLM's meanings. The
// server resolves defaults (generation_config, max_model_len) before submit.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hyllm {

struct SamplingParams {
  int n = 1;                       // completions sharing one prompt computation
  float temperature = 1.0f;        // 0 = greedy
  float top_p = 1.0f;              // 1 = off
  int top_k = 0;                   // 0 or -1 = off
  float min_p = 0.0f;              // 0 = off
  float presence_penalty = 0.0f;   // additive, over generated tokens
  float frequency_penalty = 0.0f;  // additive, per occurrence in generated tokens
  float repetition_penalty = 1.0f; // multiplicative, over prompt and generated tokens
  std::optional<uint64_t> seed;    // same seed, same tokens, whatever else is batched
  int max_tokens = 16;
  int min_tokens = 0;              // EOS and stop tokens are masked until reached
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;   // matched by the caller's StopStringHook
  std::optional<int> logprobs;     // top-N logprobs per token (0 = only the sampled one)
  // vLLM's prompt_logprobs: the logprob and rank of every prompt token after
  // the first given the tokens before it, with the top-N there (0 = only the
  // prompt token's own). Such a request skips the prefix cache's lookup.
  std::optional<int> prompt_logprobs;
  // Added to the logits of these ids (ascending, each once) with the bans,
  // before the penalties: OpenAI's and vLLM's logit_bias.
  std::vector<std::pair<int32_t, float>> logit_bias;

  bool greedy() const { return temperature <= 0.0f; }
};

}  // namespace hyllm
