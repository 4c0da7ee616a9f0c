#pragma once
// A token's logprob as the engine reports it: for a sampled token, or for a
// prompt token given the tokens before it (prompt logprobs).

#include <cstdint>
#include <utility>
#include <vector>

namespace hyllm {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;                                 // of the raw model distribution
  std::vector<std::pair<int32_t, float>> top_logprobs;  // the most likely tokens, best first
  // Prompt logprobs only (0 elsewhere): 1 + the number of tokens more likely
  // than `token`.
  int32_t rank = 0;
};

}  // namespace hyllm
