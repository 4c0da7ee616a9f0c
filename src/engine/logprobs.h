#pragma once
// Logprobs of one row of raw logits, shared by the sampler (the sampled
// token's) and prompt scoring (each prompt token's given the tokens before
// it): log_softmax in double, so that sums over a large vocabulary stay
// stable, and the most likely tokens with the lowest id first on ties.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/token_logprob.h"

namespace hyllm {

void log_softmax(std::span<const float> logits, std::vector<double>& out);

// The k most likely tokens of a log_softmax row, best first; `order` only
// saves allocations.
std::vector<std::pair<int32_t, float>> most_likely(std::span<const double> logprobs, int k,
                                                   std::vector<int32_t>& order);

// `token`'s logprob and rank (1 + the tokens with a higher logit) in a row of
// raw logits, with the num_top most likely tokens. The vectors only save
// allocations.
TokenLogprob score_token(std::span<const float> logits, int32_t token, int num_top, std::vector<double>& logprobs,
                         std::vector<int32_t>& order);

}  // namespace hyllm
