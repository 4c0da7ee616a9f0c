#include "engine/runner/decode_graphs.h"

#include <algorithm>
#include <exception>

#include "util/log.h"

namespace hyllm {

DecodeGraphs::DecodeGraphs(GraphRecorder recorder, int64_t max_model_len, int64_t max_batch)
    : recorder_(std::move(recorder)),
      max_model_len_(max_model_len),
      max_batch_(std::clamp<int64_t>(max_batch, 1, kMaxBatch)) {}

int64_t DecodeGraphs::seq_len_bucket(int64_t max_seq_len, int64_t max_model_len) {
  constexpr int64_t kShortContext = 256;
  constexpr int64_t kMidContext = 4096;
  const int64_t b = max_seq_len <= kShortContext ? kShortContext
                    : max_seq_len <= kMidContext ? kMidContext
                                                 : max_model_len;
  return std::max(std::min(b, max_model_len), max_seq_len);
}

int64_t DecodeGraphs::capture_size(int64_t seqs, int64_t limit) {
  if (seqs > kMaxBatch || seqs >= limit) return seqs;
  const int64_t step = seqs <= 256 ? 8 : 16;
  int64_t size = seqs <= 1 ? 1 : seqs <= 2 ? 2 : seqs <= 4 ? 4 : (seqs + step - 1) / step * step;
  return std::min(size, limit);
}

std::vector<int64_t> DecodeGraphs::capture_sizes(int64_t limit) {
  std::vector<int64_t> sizes;
  for (int64_t seqs = 1; seqs <= std::min(limit, kMaxBatch); ++seqs) {
    const int64_t size = capture_size(seqs, limit);
    if (sizes.empty() || sizes.back() != size) sizes.push_back(size);
  }
  return sizes;
}

std::vector<int64_t> DecodeGraphs::seq_len_buckets(int64_t max_model_len) {
  std::vector<int64_t> buckets;
  for (int64_t len : {int64_t{1}, int64_t{257}, max_model_len}) {
    const int64_t b = seq_len_bucket(std::min(len, max_model_len), max_model_len);
    if (buckets.empty() || buckets.back() < b) buckets.push_back(b);
  }
  return buckets;
}

int64_t DecodeGraphs::recorded() const {
  int64_t n = 0;
  for (const auto& [key, entry] : graphs_) n += entry.graph != nullptr ? 1 : 0;
  return n;
}

DecodeGraphs::Key DecodeGraphs::key(const StepContext& ctx) const {
  return Key{ctx.num_seqs, ctx.sample_rows.numel(), seq_len_bucket(ctx.max_seq_len, max_model_len_), ctx.max_query_len};
}

bool DecodeGraphs::recordable(const StepContext& ctx) const {
  const bool uniform = ctx.decode_only || ctx.uniform_query_len > 0;
  return recorder_ && uniform && ctx.num_seqs <= max_batch_;
}

bool DecodeGraphs::ready(const StepContext& ctx) const {
  if (!recordable(ctx)) return false;
  auto it = graphs_.find(key(ctx));
  return it != graphs_.end() && it->second.graph && it->second.graph->valid();
}

TensorView DecodeGraphs::run(StepContext& ctx, const std::function<TensorView(const StepContext&)>& forward) {
  if (!recordable(ctx)) return forward(ctx);
  ctx.max_seq_len = seq_len_bucket(ctx.max_seq_len, max_model_len_);
  const Key k = key(ctx);
  auto it = graphs_.find(k);
  if (it == graphs_.end()) {
    if (graphs_.size() < kMaxGraphs) graphs_.emplace(k, Entry{});
    return forward(ctx);
  }
  Entry& e = it->second;
  if (!(e.graph && e.graph->valid()) && !record(e, ctx, forward)) return forward(ctx);
  e.graph->replay();
  ++replays_;
  return *e.logits;
}

void DecodeGraphs::capture(StepContext& ctx, const std::function<TensorView(const StepContext&)>& forward) {
  if (!recordable(ctx) || ready(ctx)) return;
  ctx.max_seq_len = seq_len_bucket(ctx.max_seq_len, max_model_len_);
  const Key k = key(ctx);
  if (!graphs_.count(k) && graphs_.size() >= kMaxGraphs) return;
  forward(ctx);
  record(graphs_[k], ctx, forward);
}

bool DecodeGraphs::record(Entry& e, const StepContext& ctx,
                          const std::function<TensorView(const StepContext&)>& forward) {
  e.graph.reset();
  // The body owns copies of what it uses: a recorder may keep it (the CPU
  // tests' stand-in replays by calling it again).
  auto recorded = std::make_shared<StepContext>(ctx);
  auto logits = std::make_shared<TensorView>();
  try {
    e.graph = recorder_([recorded, logits, forward] { *logits = forward(*recorded); });
    e.logits = logits;
  } catch (const std::exception& err) {
    // Nothing ran: the recording only recorded. The caller runs the step op by op.
    log::warn("decode steps run op by op from now on: recording a device graph failed ({})", err.what());
    recorder_ = nullptr;
    graphs_.clear();
    return false;
  }
  return true;
}

}  // namespace hyllm
