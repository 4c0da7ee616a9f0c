#include "engine/runner/decode_graphs.h"

#include <algorithm>
#include <exception>

#include "util/log.h"

namespace hyllm {

DecodeGraphs::DecodeGraphs(GraphRecorder recorder, int64_t max_model_len)
    : recorder_(std::move(recorder)), max_model_len_(max_model_len) {}

int64_t DecodeGraphs::seq_len_bucket(int64_t max_seq_len, int64_t max_model_len) {
  constexpr int64_t kShortContext = 256;
  const int64_t b = max_seq_len <= kShortContext ? kShortContext : max_model_len;
  return std::max(std::min(b, max_model_len), max_seq_len);
}

int64_t DecodeGraphs::capture_size(int64_t seqs, int64_t limit) {
  if (seqs > kMaxBatch || seqs >= limit) return seqs;
  const int64_t step = seqs <= 256 ? 8 : 16;
  int64_t size = seqs <= 1 ? 1 : seqs <= 2 ? 2 : seqs <= 4 ? 4 : (seqs + step - 1) / step * step;
  return std::min(size, limit);
}

int64_t DecodeGraphs::recorded() const {
  int64_t n = 0;
  for (const auto& [key, entry] : graphs_) n += entry.graph != nullptr ? 1 : 0;
  return n;
}

TensorView DecodeGraphs::run(StepContext& ctx, const std::function<TensorView(const StepContext&)>& forward) {
  const bool uniform = ctx.decode_only || ctx.uniform_query_len > 0;
  if (!recorder_ || !uniform || ctx.num_seqs > kMaxBatch) return forward(ctx);
  ctx.max_seq_len = seq_len_bucket(ctx.max_seq_len, max_model_len_);
  const Key key{ctx.num_seqs, ctx.sample_rows.numel(), ctx.max_seq_len, ctx.max_query_len};
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() < kMaxGraphs) graphs_.emplace(key, Entry{});
    return forward(ctx);
  }
  Entry& e = it->second;
  if (e.graph && e.graph->valid()) {
    e.graph->replay();
    ++replays_;
    return e.logits;
  }
  e.graph.reset();
  // The body owns copies of what it uses: a recorder may keep it (the CPU
  // tests' stand-in replays by calling it again).
  auto recorded = std::make_shared<StepContext>(ctx);
  auto logits = std::make_shared<TensorView>();
  try {
    e.graph = recorder_([recorded, logits, forward] { *logits = forward(*recorded); });
  } catch (const std::exception& err) {
    // Nothing ran: the recording only recorded. Run the step op by op.
    log::warn("decode steps run op by op from now on: recording a device graph failed ({})", err.what());
    recorder_ = nullptr;
    graphs_.clear();
    return forward(ctx);
  }
  e.graph->replay();
  ++replays_;
  e.logits = *logits;
  return e.logits;
}

}  // namespace hyllm
