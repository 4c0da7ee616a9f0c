#pragma once
// vLLM's "prefix_repetition" dataset: num_prefixes random prefixes of
// prefix_len tokens, each followed by num_prompts / num_prefixes random
// suffixes of suffix_len tokens, shuffled. Each part is fitted to its exact
// token length on its own (random_dataset.h), so the prompt's prefix is the
// same text in every request that shares it: what a prefix cache serves.

#include <cstdint>
#include <vector>

#include "bench/random_dataset.h"

namespace hyllm::bench {

struct PrefixRepetitionOptions {
  int num_prompts = 1000;
  int prefix_len = 256;    // --prefix-repetition-prefix-len
  int suffix_len = 256;    // --prefix-repetition-suffix-len
  int num_prefixes = 10;   // --prefix-repetition-num-prefixes
  int output_len = 128;    // --prefix-repetition-output-len
  uint64_t seed = 0;
  bool shuffle = true;
};

// num_prompts / num_prefixes * num_prefixes requests (vLLM's count).
std::vector<SampleRequest> make_prefix_repetition_dataset(const PromptTokenizer& tok,
                                                          const PrefixRepetitionOptions& opt);

}  // namespace hyllm::bench
