#pragma once
// The host reference sampler: one row of fp32 logits and its SeqWork in, one
// SampledToken out. A pure function of its inputs (the scratch only saves
// allocations), so a token depends on nothing else in the batch.
//
// Order of operations (vLLM V1's sampler):
//  0. a structured-output bitmask, when given, sets every token it does not
//     allow to -inf first (vLLM applies it to the logits before its sampler,
//     so logprobs see it too);
//  1. logprobs, when asked, come from log_softmax of the raw logits (vLLM's
//     default logprobs_mode "raw_logprobs"): penalties, temperature and the
//     top-k/top-p/min-p masks do not change them;
//  2. banned ids (EOS and stop ids before min_tokens) are set to -inf and
//     the request's logit_bias is added (vLLM applies both as logits
//     processors before its penalties; -inf stays -inf);
//  3. repetition penalty over prompt + output tokens (positive logits are
//     divided by it, negative ones multiplied), then frequency (times the count
//     in the output) and presence (once if in the output) penalties subtracted;
//  4. temperature < 1e-5 is greedy: argmax, the lowest id on ties;
//  5. otherwise logits /= temperature, then min-p (drop tokens whose
//     probability is below min_p * the highest), top-k (keep the logits >= the
//     k-th largest, ties kept), top-p (drop the least likely tokens while their
//     cumulative probability stays <= 1 - top_p; the most likely always stays);
//  6. one uniform u in [0, 1) from (seed, sample_index) by SplitMix64 picks the
//     token by inverse CDF over the kept tokens in id order.

#include <cstdint>
#include <span>
#include <vector>

#include "engine/executor.h"

namespace hyllm {

// The uniform draw of step 6, exposed for tests and device samplers.
double sampler_uniform(uint64_t seed, uint64_t sample_index);

// Step 0 in place.
void apply_token_bitmask(std::span<float> logits, std::span<const uint32_t> allowed);
// Steps 2-3 in place. `scratch` only saves allocations.
void apply_bans_and_penalties(std::span<float> logits, const SeqWork& work, std::vector<int32_t>& scratch);
// Step 5 in place (temperature must be >= 1e-5): masked tokens become -inf.
void apply_temperature_and_masks(std::span<float> logits, const SamplingParams& params,
                                 std::vector<int32_t>& scratch);

class Sampler {
 public:
  // logits.size() is the vocab size; work.sampling must be set. allowed:
  // empty, or the structured-output bitmask of step 0
  // (engine/token_constraint.h), at least bitmask_words(vocab) words.
  // Returns token -1 when the mask and bans leave no token to sample: that
  // row's request fails alone, never the step's other rows.
  SampledToken sample(std::span<const float> logits, const SeqWork& work, std::span<const uint32_t> allowed = {});

 private:
  std::vector<float> work_logits_;
  std::vector<int32_t> order_;
  std::vector<double> probs_;
  std::vector<double> weights_;
};

}  // namespace hyllm
