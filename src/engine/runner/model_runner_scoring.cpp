// Prompt logprobs (executor.h, SeqWork::score_ids). The forward keeps every
// token's final hidden state (StepContext::keep_final_hidden); after sampling,
// the scored positions' logits come from Model::final_logits in passes of up
// to the sampled-row capacity (the logits buffer's rows), so a step scores as
// many positions as it computes. Each pass's rows are copied to the host and
// scored there (log_softmax in double, the prompt token's rank, the top N)
// on the thread pool.

#include "engine/logprobs.h"
#include "engine/runner/model_runner.h"
#include "util/thread_pool.h"

namespace hyllm {

std::vector<std::vector<TokenLogprob>> ModelRunner::score_positions() {
  Backend& be = model_->backend();
  const int64_t V = model_->vocab_size();
  const auto total = static_cast<int64_t>(score_rows_.size());
  const int64_t capacity = dev_.score_rows.view().numel();
  std::vector<TokenLogprob> scored(static_cast<size_t>(total));
  for (int64_t begin = 0; begin < total; begin += capacity) {
    const int64_t n = std::min(capacity, total - begin);
    be.copy_to_device(dev_.score_rows.data(), score_rows_.data() + begin, static_cast<size_t>(n) * sizeof(int32_t));
    const TensorView rows = dev_.score_rows.view().reshape(Shape{capacity}).slice_rows(0, n);
    const TensorView logits = model_->final_logits(rows);
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
        scored[static_cast<size_t>(begin + i)] =
            score_token(row, w->score_ids[j], w->num_prompt_logprobs, logprobs, order);
      }
    });
  }
  // One list per chunk: a chunk's positions are contiguous in step order.
  std::vector<std::vector<TokenLogprob>> chunks;
  for (size_t i = 0; i < scored.size(); ++i) {
    if (i == 0 || score_src_[i].first != score_src_[i - 1].first) chunks.emplace_back();
    chunks.back().push_back(std::move(scored[i]));
  }
  return chunks;
}

}  // namespace hyllm
