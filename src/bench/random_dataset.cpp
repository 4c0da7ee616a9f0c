#include "bench/random_dataset.h"

#include <cmath>
#include <random>

#include "util/status.h"

namespace hyllm::bench {
namespace {

std::pair<int, int> length_range(int len, double ratio) {
  int lo = static_cast<int>(std::floor(len * (1.0 - ratio)));
  int hi = static_cast<int>(std::ceil(len * (1.0 + ratio)));
  return {std::max(lo, 1), std::max(hi, 1)};
}

}  // namespace

std::vector<SampleRequest> make_random_dataset(const PromptTokenizer& tok, const RandomDatasetOptions& opt) {
  if (opt.num_prompts <= 0) fail(ErrorCode::kInvalidArgument, "--num-prompts must be positive");
  if (opt.input_len <= 0 || opt.output_len <= 0)
    fail(ErrorCode::kInvalidArgument, "--random-input-len and --random-output-len must be positive");
  if (opt.range_ratio < 0.0 || opt.range_ratio >= 1.0)
    fail(ErrorCode::kInvalidArgument, "--random-range-ratio must be in [0, 1)");

  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (!tok.is_special(id)) allowed.push_back(id);
  if (allowed.empty()) fail(ErrorCode::kInvalidArgument, "the tokenizer has no non-special tokens");
  const auto n_allowed = static_cast<int64_t>(allowed.size());

  std::mt19937_64 rng(opt.seed);
  auto [in_lo, in_hi] = length_range(opt.input_len, opt.range_ratio);
  auto [out_lo, out_hi] = length_range(opt.output_len, opt.range_ratio);
  std::uniform_int_distribution<int> in_dist(in_lo, in_hi), out_dist(out_lo, out_hi);
  std::uniform_int_distribution<int64_t> id_dist(0, n_allowed - 1);

  std::vector<int32_t> prefix;
  for (int i = 0; i < opt.prefix_len; ++i) prefix.push_back(allowed[static_cast<size_t>(id_dist(rng))]);

  std::vector<SampleRequest> out;
  out.reserve(static_cast<size_t>(opt.num_prompts));
  for (int i = 0; i < opt.num_prompts; ++i) {
    int in_len = in_dist(rng);
    int out_len = out_dist(rng);
    int64_t offset = id_dist(rng);
    std::vector<int32_t> ids = prefix;
    for (int j = 0; j < in_len; ++j) ids.push_back(allowed[static_cast<size_t>((offset + i + j) % n_allowed)]);
    const size_t target = ids.size();
    // Text does not always re-encode to the ids it came from: correct the
    // length by padding with random tokens or truncating, a few times over.
    std::string prompt;
    for (int attempt = 0;; ++attempt) {
      prompt = tok.decode(ids);
      ids = tok.encode(prompt);
      if (ids.size() == target || attempt == 10) break;
      if (ids.size() < target) {
        while (ids.size() < target) ids.push_back(allowed[static_cast<size_t>(id_dist(rng))]);
      } else {
        ids.resize(target);
      }
    }
    out.push_back({prompt, static_cast<int>(ids.size()), out_len});
  }
  return out;
}

}  // namespace hyllm::bench
