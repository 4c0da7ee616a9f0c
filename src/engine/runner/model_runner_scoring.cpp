// Prompt logprobs (executor.h, SeqWork::score_ids). The forward keeps every
// token's final hidden state (StepContext::keep_final_hidden); after sampling,
// the scored positions' logits come from Model::final_logits in passes of up
// to the sampled-row capacity (the logits buffer's rows), so a step scores as
// many positions as it computes. Each pass is scored where its logits are:
// by the device sampler (a row per position with the prompt token as its
// target) when there is one and it returns as many top entries as every
// position asks for; otherwise its rows are copied to the host and scored
// there (log_softmax in double, the prompt token's rank, the top N) on the
// thread pool. Only the scores cross to the host on the first path, where
// the second moves a whole vocabulary of logits per position.

#include "engine/logprobs.h"
#include "engine/runner/model_runner.h"
#include "util/thread_pool.h"

namespace hyllm {

std::vector<std::vector<TokenLogprob>> ModelRunner::score_positions() {
  const auto total = static_cast<int64_t>(score_rows_.size());
  const int64_t capacity = dev_.score_rows.view().numel();
  std::vector<TokenLogprob> scored(static_cast<size_t>(total));
  bool on_device = opts_.device_sampler != nullptr;
  for (const auto& [w, j] : score_src_) on_device = on_device && w->num_prompt_logprobs <= kMaxDeviceTopLogprobs;
  for (int64_t begin = 0; begin < total; begin += capacity) {
    const int64_t n = std::min(capacity, total - begin);
    model_->backend().copy_to_device(dev_.score_rows.data(), score_rows_.data() + begin,
                                     static_cast<size_t>(n) * sizeof(int32_t));
    const TensorView rows = dev_.score_rows.view().reshape(Shape{capacity}).slice_rows(0, n);
    const TensorView logits = model_->final_logits(rows);
    std::span<TokenLogprob> out(scored.data() + begin, static_cast<size_t>(n));
    if (on_device) {
      score_on_device(logits, begin, out);
    } else {
      score_on_host(logits, begin, out);
    }
  }
  // One list per chunk: a chunk's positions are contiguous in step order.
  std::vector<std::vector<TokenLogprob>> chunks;
  for (size_t i = 0; i < scored.size(); ++i) {
    if (i == 0 || score_src_[i].first != score_src_[i - 1].first) chunks.emplace_back();
    chunks.back().push_back(std::move(scored[i]));
  }
  return chunks;
}

void ModelRunner::score_on_device(const TensorView& logits, int64_t begin, std::span<TokenLogprob> out) {
  device_rows_.assign(out.size(), DeviceSamplingRow{});
  for (size_t i = 0; i < out.size(); ++i) {
    const auto [w, j] = score_src_[static_cast<size_t>(begin) + i];
    DeviceSamplingRow& r = device_rows_[i];
    r.temperature = 0.0f;
    r.num_logprobs = w->num_prompt_logprobs;
    r.target = w->score_ids[j];
  }
  std::vector<DeviceSampledToken> tokens = opts_.device_sampler->sample(logits, device_rows_);
  HYLLM_CHECK(tokens.size() == out.size(), "device sampler scored {} rows for {}", tokens.size(), out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    DeviceSampledToken& t = tokens[i];
    out[i] = TokenLogprob{t.token, t.logprob, std::move(t.top_logprobs), t.rank};
  }
}

void ModelRunner::score_on_host(const TensorView& logits, int64_t begin, std::span<TokenLogprob> out) {
  Backend& be = model_->backend();
  const int64_t V = model_->vocab_size(), n = static_cast<int64_t>(out.size());
  score_logits_.resize(static_cast<size_t>(n * V));
  be.copy_to_host(score_logits_.data(), logits.data(), score_logits_.size() * sizeof(float));
  be.synchronize();
  // A softmax over the whole vocabulary per position: each task writes only its own positions.
  ThreadPool::global().parallel_for(0, n, [&](int64_t lo, int64_t hi) {
    std::vector<double> logprobs;
    std::vector<int32_t> order;
    for (int64_t i = lo; i < hi; ++i) {
      const auto [w, j] = score_src_[static_cast<size_t>(begin + i)];
      std::span<const float> row(score_logits_.data() + i * V, static_cast<size_t>(V));
      out[static_cast<size_t>(i)] = score_token(row, w->score_ids[j], w->num_prompt_logprobs, logprobs, order);
    }
  });
}

}  // namespace hyllm
