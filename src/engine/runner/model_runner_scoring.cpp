// Prompt logprobs (executor.h, SeqWork::score_ids): each scored prompt
// position's logits row is scored on the host against the prompt token after
// it. Copying the rows costs a vocabulary of floats each, which is why a
// step holds at most as many as it may sample (the scheduler's logit rows).

#include "engine/logprobs.h"
#include "engine/runner/model_runner.h"
#include "util/thread_pool.h"

namespace hyllm {

std::vector<std::vector<TokenLogprob>> ModelRunner::score_prompt_positions(const StepInput& input) const {
  const int64_t V = model_->vocab_size();
  std::vector<const SeqWork*> chunks;
  std::vector<std::pair<size_t, size_t>> where;  // every scored position in step order: (its chunk, its index there)
  for (const SeqWork& w : input.seqs) {
    if (w.score_ids.empty()) continue;
    for (size_t j = 0; j < w.score_ids.size(); ++j) where.emplace_back(chunks.size(), j);
    chunks.push_back(&w);
  }
  std::vector<std::vector<TokenLogprob>> scored(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) scored[c].resize(chunks[c]->score_ids.size());
  // A softmax over the whole vocabulary per position: spread over the thread
  // pool, each task writing only its own positions.
  ThreadPool::global().parallel_for(0, static_cast<int64_t>(where.size()), [&](int64_t begin, int64_t end) {
    std::vector<double> logprobs;
    std::vector<int32_t> order;
    for (int64_t i = begin; i < end; ++i) {
      const auto [c, j] = where[static_cast<size_t>(i)];
      std::span<const float> row(score_logits_.data() + i * V, static_cast<size_t>(V));
      scored[c][j] = score_token(row, chunks[c]->score_ids[j], chunks[c]->num_prompt_logprobs, logprobs, order);
    }
  });
  return scored;
}

}  // namespace hyllm
