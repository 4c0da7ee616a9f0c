#pragma once
// What the runner tests share: the embedded model and small capacities.

#include <algorithm>
#include <filesystem>
#include <vector>

#include "backend/device_sampler.h"
#include "engine/logprobs.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"

namespace hyllm::test {

inline std::filesystem::path tiny_model() { return std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny"; }

inline ModelOptions small_model_options() {
  ModelOptions mo;
  mo.max_num_tokens = 256;
  mo.max_num_seqs = 8;
  return mo;
}

inline RunnerOptions small_runner_options() {
  RunnerOptions ro;
  ro.max_num_tokens = 256;
  ro.max_num_seqs = 8;
  ro.max_model_len = 128;
  return ro;
}

// A DeviceSampler for the CPU backend (whose logits are host memory): greedy
// over the rows it is given, whatever their parameters say, so that a row
// that reached it shows in tokens that ignore a bias; a row with a target is
// scored as the interface says (engine/logprobs.h's score_token). Counts its
// calls and the rows of logits each was given.
class GreedyDeviceSampler : public DeviceSampler {
 public:
  int calls = 0;
  std::vector<int64_t> logit_rows;
  std::vector<DeviceSampledToken> sample(const TensorView& logits, std::span<const DeviceSamplingRow> rows) override {
    ++calls;
    logit_rows.push_back(logits.dim(0));
    const int64_t V = logits.dim(1);
    std::vector<DeviceSampledToken> out(rows.size());
    std::vector<double> logprobs;
    std::vector<int32_t> order;
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* row = logits.data_as<const float>() + static_cast<int64_t>(r) * V;
      if (rows[r].target >= 0) {
        TokenLogprob t = score_token(std::span<const float>(row, static_cast<size_t>(V)), rows[r].target,
                                     std::max(rows[r].num_logprobs, 0), logprobs, order);
        out[r] = DeviceSampledToken{t.token, t.logprob, std::move(t.top_logprobs), t.rank};
        continue;
      }
      out[r].token = static_cast<int32_t>(std::max_element(row, row + V) - row);
    }
    return out;
  }
};

}  // namespace hyllm::test
