#pragma once
// The request fields that completions and chat share: sampling knobs, stops,
// streaming options. Values are validated with vLLM's rules and messages;
// defaults that depend on the model (generation_config, context length) are
// resolved later by resolve_sampling_params.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"
#include "serve/json_fields.h"

namespace hyllm::serve {

struct SamplingRequest {
  int n = 1;
  // Unset values take the model's generation_config defaults, else vLLM's.
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<int64_t> max_tokens;  // unset: up to the context length
  int64_t min_tokens = 0;
  std::optional<uint64_t> seed;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::pair<int32_t, float>> logit_bias;  // ids ascending, biases clamped to [-100, 100]
  std::vector<int32_t> allowed_token_ids;             // vLLM: empty = every token
  std::vector<std::string> bad_words;                 // vLLM: words the output may not contain
  std::string cache_salt;                             // vLLM: empty = the shared prefix cache
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  std::optional<int> logprobs;  // top-N alternatives per token; unset = no logprobs
  // vLLM's prompt_logprobs: top-N at every prompt token; -1 = the whole
  // vocabulary (which the engine's max_logprobs then refuses, as vLLM's does).
  std::optional<int> prompt_logprobs;
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage_stats = false;  // stream_options.continuous_usage_stats
  bool return_token_ids = false;        // vLLM: prompt and output ids in the response
  bool return_tokens_as_token_ids = false;  // vLLM: logprobs' tokens as "token_id:N"
  // Fields of the request body that nothing read (the handler logs them, as vLLM does).
  std::vector<std::string> ignored_fields;
};

// Logs the fields a request sent that the server ignored, once, as vLLM does.
void warn_ignored_fields(const SamplingRequest& s);

// Parses everything but logprobs and max_tokens, whose spelling differs
// between the two endpoints.
SamplingRequest parse_sampling_request(const FieldReader& r);

// The logprobs count's check here: not negative (the engine holds it to
// --max-logprobs).
int validate_logprobs_count(int64_t value, const char* field);
// max_tokens >= 1 and min_tokens <= max_tokens.
void validate_max_tokens(SamplingRequest& s, std::optional<int64_t> max_tokens, const char* field);

// Model-level defaults a request falls back to (--generation-config).
struct SamplingDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int64_t> max_new_tokens;  // caps every request
};

// Resolves defaults and checks the request against the context: prompt_tokens
// plus max_tokens must fit max_model_len (400 "maximum context length is").
SamplingParams resolve_sampling_params(const SamplingRequest& s, const SamplingDefaults& defaults,
                                       int64_t prompt_tokens, int64_t max_model_len, int vocab_size);

}  // namespace hyllm::serve
