#include "serve/sampling_request.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "serve/api_error.h"
#include "serve/limits.h"
#include "util/log.h"

namespace hyllm::serve {
namespace {

// vLLM treats temperatures below this as greedy.
constexpr float kGreedyEpsilon = 1e-5f;

// A token id as Python's int() reads a string, which is how vLLM reads a
// logit_bias key: surrounding whitespace, a sign, and single underscores
// between digits are allowed. nullopt when it is no integer or out of int32.
std::optional<int32_t> python_int(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string_view::npos) return std::nullopt;
  s = s.substr(first, s.find_last_not_of(" \t\n\r\f\v") - first + 1);
  const bool negative = s.front() == '-';
  if (s.front() == '+' || s.front() == '-') s.remove_prefix(1);
  if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
  int64_t value = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (s[i + 1] == '_') return std::nullopt;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    value = value * 10 + (s[i] - '0');
    if (value > int64_t{1} << 32) return std::nullopt;
  }
  value = negative ? -value : value;
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return static_cast<int32_t>(value);
}

// logit_bias: {"token id": bias}, the ids as strings of integers (JSON keys
// are strings), each bias clamped to [-100, 100] as OpenAI and vLLM do.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const Json& bias) {
  if (bias.size() > kMaxLogitBiasEntries) {
    throw bad_request(fmt::format("logit_bias has {} entries; at most {} are allowed.", bias.size(),
                                  kMaxLogitBiasEntries),
                      "logit_bias");
  }
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, value] : bias.items()) {
    const std::optional<int32_t> id = python_int(key);
    if (!id) {
      throw bad_request(fmt::format("Found token_id `{}` in logit_bias but token_id must be an integer or string "
                                    "representing an integer",
                                    key),
                        "logit_bias");
    }
    if (!value.is_number() || !std::isfinite(value.get<double>())) {
      throw bad_request(fmt::format("logit_bias[\"{}\"] must be a finite number.", key), "logit_bias");
    }
    out.emplace_back(*id, static_cast<float>(std::clamp(value.get<double>(), -100.0, 100.0)));
  }
  // "07" and "7" name one token: the last one given wins, as in a Python dict of ints.
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<int32_t, float>> unique;
  for (const auto& e : out) {
    if (!unique.empty() && unique.back().first == e.first) unique.back() = e;
    else unique.push_back(e);
  }
  return unique;
}

}  // namespace

void warn_ignored_fields(const SamplingRequest& s) {
  if (s.ignored_fields.empty()) return;
  log::warn("The following fields were present in the request but ignored: {{'{}'}}",
            fmt::join(s.ignored_fields, "', '"));
}

int validate_logprobs_count(int64_t value, const char* field) {
  if (value < 0) throw bad_request(fmt::format("`{}` must be a positive value.", field), field);
  // The upper bound is the server's --max-logprobs, which the engine checks
  // (request_validation.cpp) with vLLM's message; a count past int is past
  // any such bound, and stays so.
  return static_cast<int>(std::min<int64_t>(value, std::numeric_limits<int>::max()));
}

void validate_max_tokens(SamplingRequest& s, std::optional<int64_t> max_tokens, const char* field) {
  if (max_tokens) {
    if (*max_tokens < 1) {
      throw bad_request(fmt::format("max_tokens must be at least 1, got {}.", *max_tokens), field);
    }
    if (s.min_tokens > *max_tokens) {
      throw bad_request(fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}.",
                                    *max_tokens, s.min_tokens),
                        "min_tokens");
    }
  }
  s.max_tokens = max_tokens;
}

SamplingRequest parse_sampling_request(const FieldReader& r) {
  SamplingRequest s;

  if (auto n = r.integer("n")) {
    if (*n < 1) throw bad_request(fmt::format("n must be at least 1, got {}.", *n), "n");
    if (*n > kMaxN) throw bad_request(fmt::format("n must be at most {}, got {}.", kMaxN, *n), "n");
    s.n = static_cast<int>(*n);
  }
  if (auto best_of = r.integer("best_of"); best_of && *best_of != s.n) {
    throw bad_request("best_of is not supported; use n", "best_of");
  }
  if (const auto* bias = r.object("logit_bias")) s.logit_bias = parse_logit_bias(*bias);
  if (r.get("allowed_token_ids")) {
    s.allowed_token_ids = r.int_list("allowed_token_ids", kMaxAllowedTokenIds);
    if (s.allowed_token_ids.empty()) {
      throw bad_request("allowed_token_ids is not allowed to be empty.", "allowed_token_ids");
    }
  }
  if (r.get("cache_salt")) {
    auto salt = r.string("cache_salt");
    if (!salt || salt->empty()) {
      throw bad_request("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    }
    s.cache_salt = std::move(*salt);
  }
  // vLLM parameters hyllm does not implement: refused rather than ignored,
  // since ignoring them would change what the client gets back.
  if (r.boolean("use_beam_search").value_or(false)) {
    throw bad_request("beam search is not supported; use n with sampling", "use_beam_search");
  }
  s.bad_words = r.string_or_list("bad_words", kMaxBadWords);
  for (const auto& word : s.bad_words) {
    if (word.find_first_not_of(" \t\n\r\f\v") == std::string::npos) {
      throw bad_request("bad_words cannot contain an empty word.", "bad_words");
    }
    if (word.size() > kMaxStopStringBytes) {
      throw bad_request(fmt::format("bad words are limited to {} bytes", kMaxStopStringBytes), "bad_words");
    }
  }
  if (auto priority = r.integer("priority"); priority && *priority != 0) {
    throw bad_request(fmt::format("Got priority {} but Priority scheduling is not enabled.", *priority), "priority");
  }

  if (auto t = r.number("temperature")) {
    if (*t < 0) throw bad_request(fmt::format("temperature must be non-negative, got {}.", *t), "temperature");
    s.temperature = *t < kGreedyEpsilon ? 0.0f : static_cast<float>(*t);
  }
  if (auto p = r.number("top_p")) {
    if (!(*p > 0 && *p <= 1)) throw bad_request(fmt::format("top_p must be in (0, 1], got {}.", *p), "top_p");
    s.top_p = static_cast<float>(*p);
  }
  if (auto k = r.integer("top_k")) {
    if (*k < -1) {
      throw bad_request(fmt::format("top_k must be -1 (disable), or at least 1, got {}.", *k), "top_k");
    }
    s.top_k = *k <= 0 ? 0 : static_cast<int>(std::min<int64_t>(*k, std::numeric_limits<int>::max()));
  }
  if (auto p = r.number("min_p")) {
    if (!(*p >= 0 && *p <= 1)) throw bad_request(fmt::format("min_p must be in [0, 1], got {}.", *p), "min_p");
    s.min_p = static_cast<float>(*p);
  }
  if (auto p = r.number("presence_penalty")) {
    if (!(*p >= -2 && *p <= 2)) {
      throw bad_request(fmt::format("presence_penalty must be in [-2, 2], got {}.", *p), "presence_penalty");
    }
    s.presence_penalty = static_cast<float>(*p);
  }
  if (auto p = r.number("frequency_penalty")) {
    if (!(*p >= -2 && *p <= 2)) {
      throw bad_request(fmt::format("frequency_penalty must be in [-2, 2], got {}.", *p), "frequency_penalty");
    }
    s.frequency_penalty = static_cast<float>(*p);
  }
  if (auto p = r.number("repetition_penalty")) {
    if (!(*p > 0)) {
      throw bad_request(fmt::format("repetition_penalty must be greater than zero, got {}.", *p),
                        "repetition_penalty");
    }
    s.repetition_penalty = static_cast<float>(*p);
  }
  if (auto m = r.integer("min_tokens")) {
    if (*m < 0) {
      throw bad_request(fmt::format("min_tokens must be greater than or equal to 0, got {}.", *m), "min_tokens");
    }
    s.min_tokens = *m;
  }
  if (auto seed = r.integer("seed")) s.seed = static_cast<uint64_t>(*seed);
  s.ignore_eos = r.boolean("ignore_eos").value_or(false);
  s.include_stop_str_in_output = r.boolean("include_stop_str_in_output").value_or(false);
  s.skip_special_tokens = r.boolean("skip_special_tokens").value_or(true);
  s.return_token_ids = r.boolean("return_token_ids").value_or(false);
  s.return_tokens_as_token_ids = r.boolean("return_tokens_as_token_ids").value_or(false);

  s.stop = r.string_or_list("stop", kMaxStopStrings);
  for (const auto& stop : s.stop) {
    if (stop.empty()) throw bad_request("stop cannot contain an empty string.", "stop");
    if (stop.size() > kMaxStopStringBytes) {
      throw bad_request(fmt::format("stop strings are limited to {} bytes", kMaxStopStringBytes), "stop");
    }
  }
  s.stop_token_ids = r.int_list("stop_token_ids", kMaxStopTokenIds);

  r.has("user");  // OpenAI's end-user id: accepted, no effect (as in vLLM)
  s.stream = r.boolean("stream").value_or(false);
  if (const auto* opts = r.object("stream_options")) {
    if (!s.stream) {
      throw bad_request("Stream options can only be defined when `stream=True`.", "stream_options");
    }
    FieldReader o(*opts);
    s.include_usage = o.boolean("include_usage").value_or(false);
    s.continuous_usage_stats = o.boolean("continuous_usage_stats").value_or(false);
  }
  if (auto suffix = r.string("suffix"); suffix && !suffix->empty()) {
    throw bad_request("suffix is not currently supported", "suffix");
  }
  if (auto lp = r.integer("prompt_logprobs")) {
    // As vLLM: a stream has no field for them (prompt_logprobs 0 parses and is not sent).
    if (s.stream && (*lp > 0 || *lp == -1)) {
      throw bad_request("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
    }
    if (*lp < -1) throw bad_request("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs");
    s.prompt_logprobs = static_cast<int>(std::min<int64_t>(*lp, std::numeric_limits<int>::max()));
  }
  return s;
}

SamplingParams resolve_sampling_params(const SamplingRequest& s, const SamplingDefaults& defaults,
                                       int64_t prompt_tokens, int64_t max_model_len, int vocab_size) {
  SamplingParams p;
  p.n = s.n;
  p.temperature = s.temperature.value_or(defaults.temperature.value_or(1.0f));
  p.top_p = s.top_p.value_or(defaults.top_p.value_or(1.0f));
  p.top_k = s.top_k.value_or(defaults.top_k.value_or(0));
  p.min_p = s.min_p.value_or(defaults.min_p.value_or(0.0f));
  p.repetition_penalty = s.repetition_penalty.value_or(defaults.repetition_penalty.value_or(1.0f));
  p.presence_penalty = s.presence_penalty;
  p.frequency_penalty = s.frequency_penalty;
  p.seed = s.seed;
  p.ignore_eos = s.ignore_eos;
  p.stop = s.stop;
  p.stop_token_ids = s.stop_token_ids;
  p.logprobs = s.logprobs;
  if (s.prompt_logprobs) p.prompt_logprobs = *s.prompt_logprobs == -1 ? vocab_size : *s.prompt_logprobs;
  p.logit_bias = s.logit_bias;

  for (int32_t id : s.stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      throw bad_request(fmt::format("Token id {} in stop_token_ids is out of vocabulary", id), "stop_token_ids");
    }
  }
  for (int32_t id : s.allowed_token_ids) {
    if (id < 0 || id >= vocab_size) {
      throw bad_request(fmt::format("allowed_token_ids contains out-of-vocab token id {}.", id), "allowed_token_ids");
    }
  }
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      throw bad_request(fmt::format("token_id {} in logit_bias is out of vocabulary. Vocabulary size: {}", id,
                                    vocab_size),
                        "logit_bias");
    }
  }

  // The same text as vLLM (and OpenAI before it): clients match on
  // "maximum context length is".
  if (s.max_tokens) {
    // Compared as a difference: max_tokens may be as large as INT64_MAX.
    if (*s.max_tokens > max_model_len - prompt_tokens) {
      const uint64_t requested = static_cast<uint64_t>(prompt_tokens) + static_cast<uint64_t>(*s.max_tokens);
      throw bad_request(fmt::format("This model's maximum context length is {} tokens. However, you requested "
                                    "{} tokens ({} in the messages, {} in the completion). Please reduce the "
                                    "length of the messages or completion.",
                                    max_model_len, requested, prompt_tokens, *s.max_tokens),
                        "max_tokens");
    }
  } else if (prompt_tokens >= max_model_len) {
    throw bad_request(fmt::format("This model's maximum context length is {} tokens. However, you requested "
                                  "{} tokens in the messages, Please reduce the length of the messages.",
                                  max_model_len, prompt_tokens),
                      "messages");
  }
  int64_t max_tokens = s.max_tokens.value_or(max_model_len - prompt_tokens);
  if (defaults.max_new_tokens) max_tokens = std::min(max_tokens, *defaults.max_new_tokens);
  if (s.min_tokens > max_tokens) {
    // max_tokens defaulted (to the context left, or generation_config's
    // max_new_tokens): an explicit one was checked at parse time.
    throw bad_request(fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}.", max_tokens,
                                  s.min_tokens),
                      "min_tokens");
  }
  p.max_tokens = static_cast<int>(max_tokens);
  p.min_tokens = static_cast<int>(s.min_tokens);
  return p;
}

}  // namespace hyllm::serve
