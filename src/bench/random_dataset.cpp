#include "bench/random_dataset.h"

#include <cmath>

#include "util/status.h"

namespace hyllm::bench {
namespace {

std::pair<int, int> length_range(int len, double ratio) {
  int lo = static_cast<int>(std::floor(len * (1.0 - ratio)));
  int hi = static_cast<int>(std::ceil(len * (1.0 + ratio)));
  return {std::max(lo, 1), std::max(hi, 1)};
}

}  // namespace

PromptSampler::PromptSampler(const PromptTokenizer& tok, uint64_t seed) : tok_(tok), rng_(seed) {
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (!tok.is_special(id)) allowed_.push_back(id);
  if (allowed_.empty()) fail(ErrorCode::kInvalidArgument, "the tokenizer has no non-special tokens");
  id_dist_ = std::uniform_int_distribution<int64_t>(0, num_allowed() - 1);
}

std::vector<int32_t> PromptSampler::draw_ids(int n) {
  std::vector<int32_t> ids(static_cast<size_t>(std::max(n, 0)));
  for (auto& id : ids) id = draw_id();
  return ids;
}

std::string PromptSampler::fit(std::vector<int32_t>& ids) {
  const size_t target = ids.size();
  std::string prompt;
  for (int attempt = 0;; ++attempt) {
    prompt = tok_.decode(ids);
    ids = tok_.encode(prompt);
    if (ids.size() == target || attempt == 10) break;
    if (ids.size() < target) {
      while (ids.size() < target) ids.push_back(draw_id());
    } else {
      ids.resize(target);
    }
  }
  return prompt;
}

std::vector<SampleRequest> make_random_dataset(const PromptTokenizer& tok, const RandomDatasetOptions& opt) {
  if (opt.num_prompts <= 0) fail(ErrorCode::kInvalidArgument, "--num-prompts must be positive");
  if (opt.input_len <= 0 || opt.output_len <= 0)
    fail(ErrorCode::kInvalidArgument, "--random-input-len and --random-output-len must be positive");
  if (opt.range_ratio < 0.0 || opt.range_ratio >= 1.0)
    fail(ErrorCode::kInvalidArgument, "--random-range-ratio must be in [0, 1)");

  PromptSampler sampler(tok, opt.seed);
  auto [in_lo, in_hi] = length_range(opt.input_len, opt.range_ratio);
  auto [out_lo, out_hi] = length_range(opt.output_len, opt.range_ratio);
  std::uniform_int_distribution<int> in_dist(in_lo, in_hi), out_dist(out_lo, out_hi);

  const std::vector<int32_t> prefix = sampler.draw_ids(opt.prefix_len);
  std::vector<SampleRequest> out;
  out.reserve(static_cast<size_t>(opt.num_prompts));
  for (int i = 0; i < opt.num_prompts; ++i) {
    int in_len = in_dist(sampler.rng());
    int out_len = out_dist(sampler.rng());
    int64_t offset = sampler.draw_index();
    std::vector<int32_t> ids = prefix;
    for (int j = 0; j < in_len; ++j) ids.push_back(sampler.allowed(offset + i + j));
    std::string prompt = sampler.fit(ids);
    out.push_back({prompt, static_cast<int>(ids.size()), out_len});
  }
  return out;
}

}  // namespace hyllm::bench
