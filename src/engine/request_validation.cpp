// EngineCore::validate: refuse, before queueing, every request that could
// never run, with vLLM's messages where clients grep for them.

#include <cmath>

#include "engine/engine_core.h"
#include "util/status.h"

namespace hyllm {
namespace {

template <typename... Args>
[[noreturn]] void invalid_request(fmt::format_string<Args...> f, Args&&... args) {
  fail(ErrorCode::kInvalidArgument, f, std::forward<Args>(args)...);
}

}  // namespace

void EngineCore::validate(const EngineRequest& request) const {
  const SamplingParams& s = request.sampling;
  if (request.request_id.empty()) invalid_request("request_id must not be empty");
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_token_ids.size());
  if (prompt_len == 0) invalid_request("The decoder prompt cannot be empty");
  for (int32_t t : request.prompt_token_ids) {
    if (t < 0 || t >= vocab_size_) invalid_request("Token id {} is out of vocabulary (vocab size {})", t, vocab_size_);
  }
  if (s.n < 1) invalid_request("n must be at least 1, got {}.", s.n);
  if (!request.constraints.empty()) {
    if (static_cast<int>(request.constraints.size()) != s.n) {
      invalid_request("{} structured-output constraints for n = {}", request.constraints.size(), s.n);
    }
    for (const auto& c : request.constraints) {
      if (!c) invalid_request("a structured-output constraint is missing");
    }
  }
  if (s.max_tokens < 1) invalid_request("max_tokens must be at least 1, got {}.", s.max_tokens);
  if (s.min_tokens < 0) invalid_request("min_tokens must be greater than or equal to 0, got {}.", s.min_tokens);
  if (s.min_tokens > s.max_tokens) {
    invalid_request("min_tokens must be less than or equal to max_tokens={}, got {}.", s.max_tokens, s.min_tokens);
  }
  if (!(s.temperature >= 0.0f) || std::isinf(s.temperature)) {
    invalid_request("temperature must be non-negative, got {}.", s.temperature);
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) invalid_request("top_p must be in (0, 1], got {}.", s.top_p);
  if (s.top_k < -1) invalid_request("top_k must be -1 (disable), or at least 1, got {}.", s.top_k);
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) invalid_request("min_p must be in [0, 1], got {}.", s.min_p);
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f)) {
    invalid_request("presence_penalty must be in [-2, 2], got {}.", s.presence_penalty);
  }
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f)) {
    invalid_request("frequency_penalty must be in [-2, 2], got {}.", s.frequency_penalty);
  }
  if (!(s.repetition_penalty > 0.0f) || std::isinf(s.repetition_penalty)) {
    invalid_request("repetition_penalty must be greater than zero, got {}.", s.repetition_penalty);
  }
  if (s.logprobs) {
    if (*s.logprobs < 0) invalid_request("logprobs must be non-negative, got {}.", *s.logprobs);
    if (*s.logprobs > config_.max_logprobs) {
      invalid_request("Requested sample logprobs of {}, which is greater than max allowed: {}", *s.logprobs,
              config_.max_logprobs);
    }
  }
  if (s.prompt_logprobs) {
    if (*s.prompt_logprobs < 0) invalid_request("prompt_logprobs must be non-negative, got {}.", *s.prompt_logprobs);
    if (*s.prompt_logprobs > config_.max_logprobs) {
      invalid_request("Requested prompt logprobs of {}, which is greater than max allowed: {}", *s.prompt_logprobs,
                      config_.max_logprobs);
    }
  }
  for (int32_t t : s.stop_token_ids) {
    if (t < 0 || t >= vocab_size_) invalid_request("stop_token_ids: token id {} is out of vocabulary", t);
  }
  for (size_t i = 0; i < s.logit_bias.size(); ++i) {
    const auto [t, bias] = s.logit_bias[i];
    if (t < 0 || t >= vocab_size_) invalid_request("logit_bias: token id {} is out of vocabulary", t);
    if (i > 0 && t <= s.logit_bias[i - 1].first) invalid_request("logit_bias: token ids must ascend, each once");
    if (!std::isfinite(bias)) invalid_request("logit_bias: the bias of token {} is not finite", t);
  }
  if (!s.stop.empty() && !request.stop_hook) {
    invalid_request("stop strings need a StopStringHook to match them (request {})", request.request_id);
  }

  const int64_t max_len = config_.max_model_len;
  if (prompt_len >= max_len) {
    invalid_request("This model's maximum context length is {} tokens. However, your request has {} input tokens. "
            "Please reduce the length of the input messages.", max_len, prompt_len);
  }
  if (prompt_len + s.max_tokens > max_len) {
    invalid_request("'max_tokens' or 'max_completion_tokens' is too large: {}. This model's maximum context length "
            "is {} tokens and your request has {} input tokens ({} > {} - {}).",
            s.max_tokens, max_len, prompt_len, s.max_tokens, max_len, prompt_len);
  }
  const int max_parallel = std::min(config_.max_num_seqs, plan_.num_state_slots);
  if (s.n > max_parallel) {
    invalid_request("n={} is more than the {} sequences this engine can run at once", s.n, max_parallel);
  }
  // The last sampled token is never written to the cache.
  const int64_t cached_tokens = prompt_len + s.max_tokens - 1;
  if (cached_tokens > plan_.kv_capacity_tokens) {
    invalid_request("This request needs {} KV cache tokens, more than the whole KV cache holds ({} tokens)",
            cached_tokens, plan_.kv_capacity_tokens);
  }
}

}  // namespace hyllm
