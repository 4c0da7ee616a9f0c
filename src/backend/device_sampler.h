#pragma once
// Sampling on the device that computed the logits, so that no logits cross to
// the host: the rows' tokens (and logprobs when asked) come back instead.
// Semantics are exactly the host sampler's (engine/sampler.h), step by step,
// but for logit_bias: the runner samples rows that have one again on the
// host, as it does every row of a backend that has no device sampler.
// A row may instead score a given token (prompt logprobs): its logprob, rank
// and top entries as engine/logprobs.h's score_token gives them.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace hyllm {

// The top logprobs a DeviceSampler returns per row at most.
inline constexpr int kMaxDeviceTopLogprobs = 32;

// One row's parameters, in the host sampler's terms (SamplingParams + SeqWork).
struct DeviceSamplingRow {
  float temperature = 1.0f;  // < 1e-5: greedy
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int num_logprobs = -1;  // -1 none, 0 the sampled token's, N also the top N (N <= 32)
  uint64_t seed = 0;
  uint64_t sample_index = 0;
  std::span<const int32_t> banned_ids;
  std::span<const int32_t> prompt_ids;  // repetition-penalty context
  std::span<const int32_t> output_ids;  // penalty context
  // Structured output: empty, or the bitmask of allowed tokens
  // (engine/token_constraint.h layout), applied before everything else.
  std::span<const uint32_t> allowed;
  // >= 0: nothing is sampled; the row scores this token of the raw logits
  // (token = target, its logprob when num_logprobs >= 0, and its rank). The
  // sampling parameters, bans, penalties and mask must then be the defaults.
  int32_t target = -1;
};

struct DeviceSampledToken {
  int32_t token = -1;  // -1 when every token of the row was masked
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top_logprobs;  // best first
  int32_t rank = 0;  // a scored target's: 1 + the tokens with a higher raw logit (else 0)
};

class DeviceSampler {
 public:
  virtual ~DeviceSampler() = default;
  // logits: f32 [rows, vocab] on the sampler's device, one row per entry of
  // `rows`. Synchronises the backend's stream once, to return the tokens.
  // A row with an `allowed` mask has its disallowed logits set to -inf in
  // place (the logits are the step's scratch output).
  virtual std::vector<DeviceSampledToken> sample(const TensorView& logits, std::span<const DeviceSamplingRow> rows) = 0;
};

}  // namespace hyllm
