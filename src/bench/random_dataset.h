#pragma once
// vLLM's "random" dataset: prompts made of runs of consecutive non-special
// token ids, decoded to text, re-encoded and corrected until they are exactly
// the drawn length (BENCHMARKING.md 1). Lengths are drawn uniformly from
// [floor(L(1-r)), ceil(L(1+r))].

#include <cstdint>
#include <random>
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

// Random non-special token ids and prompt text of an exact token length,
// shared by the datasets.
class PromptSampler {
 public:
  PromptSampler(const PromptTokenizer& tok, uint64_t seed);
  int64_t num_allowed() const { return static_cast<int64_t>(allowed_.size()); }
  int32_t allowed(int64_t i) const { return allowed_[static_cast<size_t>(i % num_allowed())]; }
  int64_t draw_index() { return id_dist_(rng_); }
  int32_t draw_id() { return allowed(draw_index()); }
  std::vector<int32_t> draw_ids(int n);
  std::mt19937_64& rng() { return rng_; }
  // Text does not always re-encode to the ids it came from: corrects the
  // length by padding with random ids or truncating, a few times over.
  // Returns the text; `ids` becomes its encoding.
  std::string fit(std::vector<int32_t>& ids);

 private:
  const PromptTokenizer& tok_;
  std::vector<int32_t> allowed_;
  std::mt19937_64 rng_;
  std::uniform_int_distribution<int64_t> id_dist_;
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
