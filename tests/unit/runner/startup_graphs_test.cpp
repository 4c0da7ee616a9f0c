// Decode graphs recorded at startup (ModelRunner::capture_decode_graphs), on
// the CPU backend with a stand-in recorder whose replay calls the recorded
// body again: allocate_cache() records every capture size under every
// sequence-length bucket, serving steps of every batch size at short and long
// contexts then replay without recording anything, and their logits equal
// those of a runner without graphs (--enforce-eager) bit for bit.

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <stdexcept>

#include "backend/cpu/cpu_backend.h"
#include "engine/runner/decode_graphs.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "runner_test_util.h"

namespace hyllm {
namespace {

class StandInGraph final : public DeviceGraph {
 public:
  explicit StandInGraph(std::function<void()> body) : body_(std::move(body)) {}
  void replay() override { body_(); }
  bool valid() const override { return true; }

 private:
  std::function<void()> body_;
};

struct Recorder {
  int recordings = 0;
  GraphRecorder get() {
    return [this](const std::function<void()>& body) -> std::unique_ptr<DeviceGraph> {
      ++recordings;
      return std::make_unique<StandInGraph>(body);
    };
  }
};

constexpr int64_t kMaxModelLen = 512;  // two buckets: <= 256 and 512
constexpr int kSeqs = 9;               // one more than a step holds
constexpr int kBlocksPerSeq = kMaxModelLen / 16;

struct Trace {
  std::vector<std::vector<int32_t>> tokens;  // per sequence: prompt, then sampled
  std::vector<std::vector<float>> logits;    // per step: every sampled row
  int recorded_at_startup = 0, recorded_after = 0;
  int64_t replays = 0, decode_steps = 0;
};

// Sequence 0's prompt is longer than the short bucket; the others are short.
// Decode steps take batches of 1..8 sequences, with sequence 0 (long bucket)
// and without it (short bucket).
Trace serve(bool graphs, int64_t max_graph_batch = DecodeGraphs::kMaxBatch) {
  auto be = make_cpu_backend();
  RunnerOptions ro = test::small_runner_options();
  ro.max_model_len = kMaxModelLen;
  ro.max_graph_batch = max_graph_batch;
  Recorder rec;
  if (graphs) ro.record_graph = rec.get();
  ModelRunner runner(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
  const CacheLayout layout = runner.cache_layout();
  runner.allocate_cache({.block_size = 16,
                         .num_blocks = kSeqs * kBlocksPerSeq + layout.reserved_blocks,
                         .num_state_slots = kSeqs + layout.reserved_state_slots});
  Trace t;
  t.recorded_at_startup = rec.recordings;
  EXPECT_EQ(runner.recorded_graphs(), rec.recordings);
  EXPECT_EQ(runner.graph_replays(), 0);

  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const int32_t V = runner.vocab_size();
  t.tokens.resize(kSeqs);
  t.tokens[0].resize(270);
  std::iota(t.tokens[0].begin(), t.tokens[0].end(), 1);
  for (int s = 1; s < kSeqs; ++s) t.tokens[s] = {static_cast<int32_t>((s * 37) % V), static_cast<int32_t>(s)};
  std::vector<std::vector<int32_t>> tables(kSeqs);
  for (int s = 0; s < kSeqs; ++s)
    for (int b = 0; b < kBlocksPerSeq; ++b) tables[s].push_back(s * kBlocksPerSeq + b);
  std::vector<size_t> done(kSeqs, 0);  // tokens in the cache

  // One step over `which`: each sequence computes its tokens from done[s] on
  // (at most `chunk` of them) and samples when that reaches its end.
  auto step = [&](const std::vector<int>& which, size_t chunk) {
    StepInput in;
    std::vector<int> sampled;
    bool decode = true;
    for (int s : which) {
      SeqWork w;
      w.seq_id = s;
      const size_t n = std::min(chunk, t.tokens[s].size() - done[s]);
      w.token_ids = std::span<const int32_t>(t.tokens[s]).subspan(done[s], n);
      w.start_pos = static_cast<int64_t>(done[s]);
      w.block_table = tables[s];
      w.state_slot = s;
      w.sample = done[s] + n == t.tokens[s].size();
      w.sampling = &greedy;
      w.prompt_ids = w.token_ids;
      done[s] += n;
      decode = decode && n == 1;
      in.seqs.push_back(w);
      if (w.sample) sampled.push_back(s);
    }
    StepOutput out = runner.execute(in);
    EXPECT_EQ(out.sampled.size(), sampled.size());
    t.logits.push_back(runner.last_logits());
    for (size_t i = 0; i < sampled.size(); ++i) t.tokens[sampled[i]].push_back(out.sampled.at(i).token);
    t.decode_steps += decode ? 1 : 0;
  };
  // Prefill (op by op): sequence 0 in chunks up to its last prompt token
  // (which then comes as a decode step), the others together.
  while (done[0] + 1 < t.tokens[0].size()) step({0}, 128);
  step({1, 2, 3, 4, 5, 6, 7, 8}, 256);
  step({0}, 1);
  for (int round = 0; round < 2; ++round) {
    for (int batch = 1; batch <= 8; ++batch) {
      std::vector<int> long_ctx(1, 0), short_ctx;
      for (int s = 1; s < batch; ++s) long_ctx.push_back(s);
      for (int s = 1; s <= batch; ++s) short_ctx.push_back(kSeqs - s);
      step(long_ctx, 1);
      step(short_ctx, 1);
    }
  }
  t.recorded_after = rec.recordings;
  t.replays = runner.graph_replays();
  return t;
}

TEST(StartupGraphs, EveryDecodeShapeIsRecordedAtStartupAndServingRecordsNone) {
  const Trace eager = serve(false);
  const Trace graphs = serve(true);
  EXPECT_EQ(eager.recorded_at_startup, 0);
  EXPECT_EQ(eager.replays, 0);
  // Capture sizes 1, 2, 4, 8 under the bounds 256 and 512.
  EXPECT_EQ(graphs.recorded_at_startup, 4 * 2);
  EXPECT_EQ(graphs.recorded_after, graphs.recorded_at_startup);
  EXPECT_EQ(graphs.decode_steps, 1 + 2 * 2 * 8);
  EXPECT_EQ(graphs.replays, graphs.decode_steps);  // every decode step, from its first
  EXPECT_EQ(graphs.tokens, eager.tokens);
  ASSERT_EQ(graphs.logits.size(), eager.logits.size());
  for (size_t s = 0; s < eager.logits.size(); ++s) EXPECT_EQ(graphs.logits[s], eager.logits[s]) << "step " << s;
}

// --max-cudagraph-capture-size 3: batches 1, 2 and 3 are recorded at startup
// and replayed; larger decode steps run op by op, are not padded and are
// never recorded; the tokens and logits are those of the eager runner.
TEST(StartupGraphs, BatchesAboveTheCaptureBoundRunOpByOp) {
  const Trace eager = serve(false);
  const Trace graphs = serve(true, 3);
  EXPECT_EQ(graphs.recorded_at_startup, 3 * 2);
  EXPECT_EQ(graphs.recorded_after, graphs.recorded_at_startup);
  EXPECT_EQ(graphs.decode_steps, 1 + 2 * 2 * 8);
  EXPECT_EQ(graphs.replays, 1 + 2 * 2 * 3);  // the first decode step, then batches 1-3 of each round
  EXPECT_EQ(graphs.tokens, eager.tokens);
  ASSERT_EQ(graphs.logits.size(), eager.logits.size());
  for (size_t s = 0; s < eager.logits.size(); ++s) EXPECT_EQ(graphs.logits[s], eager.logits[s]) << "step " << s;
}

// Nothing is recorded without a recorder (--enforce-eager, the CPU backend
// in production), even where decode steps are padded.
TEST(StartupGraphs, NothingIsRecordedWithoutARecorder) {
  auto be = make_cpu_backend();
  RunnerOptions ro = test::small_runner_options();
  ro.pad_decode_steps = true;
  ModelRunner runner(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
  runner.allocate_cache({.block_size = 16, .num_blocks = 8, .num_state_slots = 4});
  EXPECT_EQ(runner.recorded_graphs(), 0);
}

// A runner of one sequence reserves no block or slot; its one capture size
// is recorded all the same (on the empty cache's last block and slot).
TEST(StartupGraphs, ARunnerOfOneSequenceRecordsItsOneShape) {
  auto be = make_cpu_backend();
  RunnerOptions ro = test::small_runner_options();
  ro.max_num_seqs = 1;
  Recorder rec;
  ro.record_graph = rec.get();
  ModelRunner runner(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
  EXPECT_EQ(runner.cache_layout().reserved_blocks, 0);
  runner.allocate_cache({.block_size = 16, .num_blocks = 8, .num_state_slots = 2});
  EXPECT_EQ(rec.recordings, 1);  // max_model_len 128: one bucket
}

}  // namespace
}  // namespace hyllm
