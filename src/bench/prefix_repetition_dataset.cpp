#include "bench/prefix_repetition_dataset.h"

#include <algorithm>

#include "util/status.h"

namespace hyllm::bench {

std::vector<SampleRequest> make_prefix_repetition_dataset(const PromptTokenizer& tok,
                                                          const PrefixRepetitionOptions& opt) {
  if (opt.num_prefixes <= 0) fail(ErrorCode::kInvalidArgument, "--prefix-repetition-num-prefixes must be positive");
  if (opt.prefix_len < 0 || opt.suffix_len < 0 || opt.prefix_len + opt.suffix_len == 0)
    fail(ErrorCode::kInvalidArgument, "--prefix-repetition-prefix-len and -suffix-len must be >= 0, not both 0");
  if (opt.output_len <= 0) fail(ErrorCode::kInvalidArgument, "--prefix-repetition-output-len must be positive");
  const int per_prefix = opt.num_prompts / opt.num_prefixes;
  if (per_prefix == 0)
    fail(ErrorCode::kInvalidArgument, "num_requests ({}) must be greater than or equal to num_prefixes ({})",
         opt.num_prompts, opt.num_prefixes);
  PromptSampler sampler(tok, opt.seed);
  std::vector<SampleRequest> out;
  out.reserve(static_cast<size_t>(per_prefix * opt.num_prefixes));
  for (int p = 0; p < opt.num_prefixes; ++p) {
    std::vector<int32_t> prefix = sampler.draw_ids(opt.prefix_len);
    sampler.fit(prefix);
    for (int i = 0; i < per_prefix; ++i) {
      std::vector<int32_t> ids = sampler.draw_ids(opt.suffix_len);
      sampler.fit(ids);
      ids.insert(ids.begin(), prefix.begin(), prefix.end());
      out.push_back({tok.decode(ids), static_cast<int>(ids.size()), opt.output_len});
    }
  }
  if (opt.shuffle) std::shuffle(out.begin(), out.end(), sampler.rng());
  return out;
}

}  // namespace hyllm::bench
