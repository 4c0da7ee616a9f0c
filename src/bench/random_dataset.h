#pragma once
// vLLM's "random" dataset: prompts made of runs of consecutive non-special
// token ids, decoded to text, re-encoded and corrected until they are exactly
// the drawn length (BENCHMARKING.md 1). Lengths are drawn uniformly from
// [floor(L(1-r)), ceil(L(1+r))].

#include <cstdint>
#include <string>
#include <vector>

namespace hyllm::bench {

// What the dataset needs of a tokenizer; the CLI adapts hyllm's Tokenizer.
class PromptTokenizer {
 public:
  virtual ~PromptTokenizer() = default;
  virtual int32_t vocab_size() const = 0;
  virtual bool is_special(int32_t id) const = 0;
  // Without special tokens.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
};

struct RandomDatasetOptions {
  int num_prompts = 1000;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0.0;
  int prefix_len = 0;  // a shared random prefix of this many tokens
  uint64_t seed = 0;
};

struct SampleRequest {
  std::string prompt;
  int prompt_len = 0;
  int expected_output_len = 0;
};

std::vector<SampleRequest> make_random_dataset(const PromptTokenizer& tok, const RandomDatasetOptions& opt);

}  // namespace hyllm::bench
