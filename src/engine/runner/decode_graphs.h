#pragma once
// Decode steps, and speculative verify steps whose sequences all bring the
// same number of drafts, replayed from recorded device graphs (what vLLM
// does with CUDA graphs): enqueueing a large model op by op costs the host several
// milliseconds a step, which for a small-active-parameter MoE is longer than
// the GPU's work. A decode step's launches depend only on its batch, its
// sampled rows and the bound on sequence lengths that sizes split-KV
// attention, so one recording serves every decode step of that shape: the
// runner's step inputs live in fixed-capacity device buffers whose contents
// change, not their addresses.
//
// Batches are padded (by the runner, see model_runner.h) to a few capture
// sizes, as vLLM pads to its cudagraph_capture_sizes: 1, 2, 4, multiples
// of 8 up to 256, then of 16 up to kMaxBatch. With the three sequence-length
// buckets that bounds the recordings by 3 x 51 whatever mix of batch sizes
// and context lengths a server sees.
//
// The runner records every decode shape at startup (capture(), what vLLM
// logs as "Capturing CUDA graphs"): for each capture size and bucket, largest
// first, a padding-only step runs op by op (sizing scratch, planning GEMMs)
// and is then recorded, so serving replays and records nothing new for plain
// decode steps.
//
// Shapes startup cannot know are recorded lazily by run(): speculative
// decoding's verify steps and MTP passes, which are not padded and so come in
// every batch size (the first step of a shape runs op by op, the second is
// recorded and replayed, later ones replay). A recording that fails turns
// graphs off for good with a warning; one that went stale (the backend's
// scratch moved) is recorded again at its next step.

#include <compare>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "backend/device_graph.h"
#include "model/step_context.h"
#include "tensor/tensor.h"

namespace hyllm {

class DecodeGraphs {
 public:
  // Batches of more sequences than this run op by op (vLLM's default bound).
  static constexpr int64_t kMaxBatch = 512;
  static constexpr size_t kMaxGraphs = 512;

  // A null recorder leaves every step op by op. Steps of more than
  // max_batch sequences (at most kMaxBatch; vLLM's
  // --max-cudagraph-capture-size) are never recorded.
  DecodeGraphs(GraphRecorder recorder, int64_t max_model_len, int64_t max_batch = kMaxBatch);

  bool enabled() const { return static_cast<bool>(recorder_); }
  // Runs one step's forward and returns its logits. For a decode step it
  // first rounds ctx.max_seq_len up to its bucket (a larger bound is always
  // correct), then replays, records or runs op by op as above.
  TensorView run(StepContext& ctx, const std::function<TensorView(const StepContext&)>& forward);
  // Startup: runs the step op by op once, then records it (not replayed:
  // nothing reads its logits). A shape with a valid recording is left alone,
  // as are all once a recording failed (enabled() then turns false).
  void capture(StepContext& ctx, const std::function<TensorView(const StepContext&)>& forward);
  // Whether the step's shape (its max_seq_len taken to its bucket) has a
  // recording that is still valid.
  bool ready(const StepContext& ctx) const;
  // Forgets every recording (the cache it points into was reallocated).
  void clear() { graphs_.clear(); }
  size_t size() const { return graphs_.size(); }
  // Shapes with a recording (size() also counts shapes seen once, not yet recorded).
  int64_t recorded() const;
  int64_t replays() const { return replays_; }
  int64_t max_batch() const { return max_batch_; }

  // The sequence-length bound a decode step is recorded under: 256 for
  // short contexts, 4096 for mid-length ones, else max_model_len (each at
  // most max_model_len). Split-KV attention sizes its splits by the bound,
  // so the short bucket keeps short steps from launching splits with nothing
  // to read, and the mid bucket keeps chat-length contexts on the plans made
  // for a few thousand keys (on CUDA, splits merged inside one cluster)
  // under a long --max-model-len; every longer context shares one recording
  // (vLLM's decode graphs have no length dimension at all).
  static int64_t seq_len_bucket(int64_t max_seq_len, int64_t max_model_len);
  // The batch a decode step of `seqs` sequences is padded to: the smallest
  // capture size (1, 2, 4, 8, 16, ..., 248, 256, 272, ..., kMaxBatch) not below seqs, at
  // most `limit` (the runner's capacity, itself a capture size then); seqs
  // itself above kMaxBatch or limit (such a step is not padded).
  static int64_t capture_size(int64_t seqs, int64_t limit);
  // Every batch capture_size() pads to in a runner of capacity `limit`,
  // ascending: the batches startup records.
  static std::vector<int64_t> capture_sizes(int64_t limit);
  // Every bound seq_len_bucket() gives under max_model_len, ascending (one
  // when max_model_len is short, else two).
  static std::vector<int64_t> seq_len_buckets(int64_t max_model_len);

 private:
  struct Key {
    int64_t seqs, rows, seq_len_bound, query_len;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    std::unique_ptr<DeviceGraph> graph;
    // Where the recorded forward puts its logits: set while recording on a
    // device, at each replay by the CPU tests' stand-in.
    std::shared_ptr<TensorView> logits;
  };
  Key key(const StepContext& ctx) const;
  bool recordable(const StepContext& ctx) const;
  // Records the step into e; false (graphs turned off, warned) when recording failed.
  bool record(Entry& e, const StepContext& ctx, const std::function<TensorView(const StepContext&)>& forward);

  GraphRecorder recorder_;
  int64_t max_model_len_;
  int64_t max_batch_;
  std::map<Key, Entry> graphs_;  // an entry without a graph: seen once
  int64_t replays_ = 0;
};

}  // namespace hyllm
