// Decode-step graphs: which steps are recorded, replayed or run op by op
// (DecodeGraphs alone, with a counting stand-in for the backend's recorder),
// and the runner on the CPU backend with a recorder whose replay calls the
// recorded body again: like a CUDA graph, it re-runs the same work on the
// same buffers, so a step that baked anything but buffer contents into its
// recording would give other tokens than the runner without graphs.

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "backend/cpu/cpu_backend.h"
#include "engine/runner/decode_graphs.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "runner_test_util.h"

namespace hyllm {
namespace {

// Replays by calling the body again; valid while *valid holds.
class StandInGraph final : public DeviceGraph {
 public:
  StandInGraph(std::function<void()> body, std::shared_ptr<bool> valid) : body_(std::move(body)), valid_(valid) {}
  void replay() override { body_(); }
  bool valid() const override { return *valid_; }

 private:
  std::function<void()> body_;
  std::shared_ptr<bool> valid_;
};

struct StandInRecorder {
  int recordings = 0;
  bool fail = false;
  std::shared_ptr<bool> valid = std::make_shared<bool>(true);
  GraphRecorder get() {
    return [this](const std::function<void()>& body) -> std::unique_ptr<DeviceGraph> {
      if (fail) throw std::runtime_error("operation not permitted when stream is capturing");
      ++recordings;
      return std::make_unique<StandInGraph>(body, valid);
    };
  }
};

StepContext decode_ctx(int64_t seqs, int64_t max_seq_len) {
  StepContext c;
  c.num_tokens = c.num_seqs = seqs;
  c.max_query_len = 1;
  c.max_seq_len = max_seq_len;
  c.decode_only = true;
  c.sample_rows = TensorView(nullptr, DType::kI32, Shape{seqs});
  return c;
}

struct CountingForward {
  int calls = 0;
  std::vector<int64_t> seen_seq_len;
  std::function<TensorView(const StepContext&)> fn() {
    return [this](const StepContext& c) {
      ++calls;
      seen_seq_len.push_back(c.max_seq_len);
      return TensorView();
    };
  }
};

TEST(DecodeGraphs, SecondStepOfAShapeIsRecordedLaterOnesReplay) {
  StandInRecorder rec;
  DecodeGraphs g(rec.get(), 4096);
  CountingForward f;
  for (int i = 0; i < 4; ++i) {
    StepContext c = decode_ctx(3, 300 + i);  // one bucket: max_model_len
    g.run(c, f.fn());
    EXPECT_EQ(c.max_seq_len, 4096);
  }
  EXPECT_EQ(rec.recordings, 1);
  EXPECT_EQ(g.replays(), 3);  // the recorded step itself, then two
  EXPECT_EQ(f.calls, 4);      // op by op once, then once per replay (the stand-in re-runs the body)
  for (int64_t len : f.seen_seq_len) EXPECT_EQ(len, 4096);
}

// Speculative verify steps where every sequence brings the same number of
// drafts are recorded like decode steps, keyed by their tokens per sequence;
// others run op by op.
TEST(DecodeGraphs, UniformVerifyStepsAreRecordedPerQueryLength) {
  StandInRecorder rec;
  DecodeGraphs g(rec.get(), 4096);
  CountingForward f;
  auto verify_ctx = [](int64_t seqs, int64_t q, bool uniform) {
    StepContext c = decode_ctx(seqs, 100);
    c.decode_only = false;
    c.num_tokens = seqs * q;
    c.max_query_len = q;
    c.uniform_query_len = uniform ? q : 0;
    c.keep_spec_states = true;
    c.sample_rows = TensorView(nullptr, DType::kI32, Shape{seqs * q});
    return c;
  };
  for (int i = 0; i < 3; ++i) {
    for (int64_t q : {2, 3}) {
      StepContext c = verify_ctx(2, q, true);
      g.run(c, f.fn());
    }
    StepContext mixed = verify_ctx(2, 3, false);
    g.run(mixed, f.fn());
  }
  EXPECT_EQ(rec.recordings, 2);
  EXPECT_EQ(g.size(), 2u);
  EXPECT_EQ(g.replays(), 4);
  EXPECT_EQ(f.calls, 9);
}

TEST(DecodeGraphs, ShapesAreBatchRowsAndSeqLenBucket) {
  StandInRecorder rec;
  DecodeGraphs g(rec.get(), 4096);
  CountingForward f;
  for (int64_t seqs : {1, 2}) {
    for (int64_t len : {100, 600}) {
      for (int i = 0; i < 2; ++i) {
        StepContext c = decode_ctx(seqs, len);
        g.run(c, f.fn());
      }
    }
  }
  EXPECT_EQ(rec.recordings, 4);
  EXPECT_EQ(g.size(), 4u);
  EXPECT_EQ(g.recorded(), 4);
  StepContext once = decode_ctx(3, 100);  // a shape seen once is noted, not recorded
  g.run(once, f.fn());
  EXPECT_EQ(g.size(), 5u);
  EXPECT_EQ(g.recorded(), 4);
  EXPECT_EQ(DecodeGraphs::seq_len_bucket(1, 4096), 256);
  EXPECT_EQ(DecodeGraphs::seq_len_bucket(256, 4096), 256);
  EXPECT_EQ(DecodeGraphs::seq_len_bucket(257, 4096), 4096);
  EXPECT_EQ(DecodeGraphs::seq_len_bucket(257, 32768), 4096);
  EXPECT_EQ(DecodeGraphs::seq_len_bucket(4096, 32768), 4096);
  EXPECT_EQ(DecodeGraphs::seq_len_bucket(4097, 32768), 32768);
  EXPECT_EQ(DecodeGraphs::seq_len_bucket(3000, 3500), 3500);  // capped at max_model_len
  EXPECT_EQ(DecodeGraphs::seq_len_bucket(100, 64), 100);      // never below the step's own bound
}

TEST(DecodeGraphs, CaptureSizesAreVllms) {
  EXPECT_EQ(DecodeGraphs::capture_size(1, 512), 1);
  EXPECT_EQ(DecodeGraphs::capture_size(2, 512), 2);
  EXPECT_EQ(DecodeGraphs::capture_size(3, 512), 4);
  EXPECT_EQ(DecodeGraphs::capture_size(5, 512), 8);
  EXPECT_EQ(DecodeGraphs::capture_size(9, 512), 16);
  EXPECT_EQ(DecodeGraphs::capture_size(17, 512), 24);
  EXPECT_EQ(DecodeGraphs::capture_size(120, 512), 120);
  EXPECT_EQ(DecodeGraphs::capture_size(121, 512), 128);
  EXPECT_EQ(DecodeGraphs::capture_size(249, 512), 256);
  EXPECT_EQ(DecodeGraphs::capture_size(257, 512), 272);  // multiples of 16 above 256
  EXPECT_EQ(DecodeGraphs::capture_size(500, 512), 512);
  EXPECT_EQ(DecodeGraphs::capture_size(512, 512), 512);
  EXPECT_EQ(DecodeGraphs::capture_size(513, 1024), 513);  // above kMaxBatch: not padded (runs op by op)
  EXPECT_EQ(DecodeGraphs::capture_size(97, 100), 100);    // the runner's capacity is the last size
  EXPECT_EQ(DecodeGraphs::capture_size(100, 100), 100);
  EXPECT_EQ(DecodeGraphs::capture_size(3, 3), 3);
}

// Every decode batch of 1..512 sequences, padded as the runner pads it, at
// every context length of a long max_model_len: the recordings are bounded
// by 2 buckets x 51 capture sizes, far below kMaxGraphs.
TEST(DecodeGraphs, PaddedDecodeShapesAreBounded) {
  StandInRecorder rec;
  constexpr int64_t kMaxModelLen = 131072;
  DecodeGraphs g(rec.get(), kMaxModelLen);
  auto forward = [](const StepContext&) { return TensorView(); };
  for (int64_t seqs = 1; seqs <= DecodeGraphs::kMaxBatch; ++seqs) {
    const int64_t padded = DecodeGraphs::capture_size(seqs, DecodeGraphs::kMaxBatch);
    ASSERT_GE(padded, seqs);
    ASSERT_LE(padded, seqs + (seqs <= 256 ? 7 : 15));
    for (int64_t len = 1; len <= kMaxModelLen; len = len * 3 + 1) {
      StepContext c = decode_ctx(padded, len);
      g.run(c, forward);
    }
  }
  EXPECT_EQ(g.size(), 3u * 51u);  // three sequence-length buckets
  EXPECT_LT(g.size(), DecodeGraphs::kMaxGraphs);
}

TEST(DecodeGraphs, PrefillAndLargeBatchesRunOpByOp) {
  StandInRecorder rec;
  DecodeGraphs g(rec.get(), 4096);
  CountingForward f;
  for (int i = 0; i < 3; ++i) {
    StepContext prefill = decode_ctx(2, 100);
    prefill.decode_only = false;
    prefill.max_query_len = 50;
    g.run(prefill, f.fn());
    EXPECT_EQ(prefill.max_seq_len, 100);  // untouched
    StepContext big = decode_ctx(DecodeGraphs::kMaxBatch + 1, 100);
    g.run(big, f.fn());
  }
  EXPECT_EQ(rec.recordings, 0);
  EXPECT_EQ(g.size(), 0u);
  EXPECT_EQ(f.calls, 6);
}

TEST(DecodeGraphs, BatchesAboveTheBoundAreNeverRecorded) {
  StandInRecorder rec;
  DecodeGraphs g(rec.get(), 4096, 16);
  EXPECT_EQ(g.max_batch(), 16);
  CountingForward f;
  for (int i = 0; i < 3; ++i) {
    StepContext at = decode_ctx(16, 100);
    g.run(at, f.fn());
    StepContext above = decode_ctx(17, 100);
    g.run(above, f.fn());
  }
  EXPECT_EQ(rec.recordings, 1);  // 16 sequences: seen, recorded, replayed
  EXPECT_EQ(g.replays(), 2);
  EXPECT_EQ(g.size(), 1u);       // 17 sequences: not even seen
  EXPECT_EQ(f.calls, 6);         // every step once (the stand-in's replay runs the body)
  EXPECT_EQ(DecodeGraphs(rec.get(), 4096, 100000).max_batch(), DecodeGraphs::kMaxBatch);
}

TEST(DecodeGraphs, StaleRecordingIsRecordedAgain) {
  StandInRecorder rec;
  DecodeGraphs g(rec.get(), 4096);
  CountingForward f;
  for (int i = 0; i < 3; ++i) {
    StepContext c = decode_ctx(1, 10);
    g.run(c, f.fn());
  }
  EXPECT_EQ(rec.recordings, 1);
  *rec.valid = false;  // the scratch arena moved
  StepContext c = decode_ctx(1, 10);
  g.run(c, f.fn());
  EXPECT_EQ(rec.recordings, 2);
}

TEST(DecodeGraphs, FailedRecordingTurnsGraphsOffAndStillRunsTheStep) {
  StandInRecorder rec;
  rec.fail = true;
  DecodeGraphs g(rec.get(), 4096);
  CountingForward f;
  for (int i = 0; i < 3; ++i) {
    StepContext c = decode_ctx(1, 10);
    g.run(c, f.fn());
  }
  EXPECT_FALSE(g.enabled());
  EXPECT_EQ(f.calls, 3);
  EXPECT_EQ(g.replays(), 0);
}

TEST(DecodeGraphs, NoRecorderMeansOpByOp) {
  DecodeGraphs g(nullptr, 4096);
  CountingForward f;
  for (int i = 0; i < 3; ++i) {
    StepContext c = decode_ctx(1, 10);
    g.run(c, f.fn());
    EXPECT_EQ(c.max_seq_len, 10);
  }
  EXPECT_EQ(f.calls, 3);
  EXPECT_EQ(g.size(), 0u);
}

TEST(DecodeGraphs, StartupSizesAndBuckets) {
  EXPECT_EQ(DecodeGraphs::capture_sizes(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(DecodeGraphs::capture_sizes(3), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(DecodeGraphs::capture_sizes(8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(DecodeGraphs::capture_sizes(20), (std::vector<int64_t>{1, 2, 4, 8, 16, 20}));
  const std::vector<int64_t> all = DecodeGraphs::capture_sizes(DecodeGraphs::kMaxBatch);
  EXPECT_EQ(all.size(), 51u);
  EXPECT_EQ(all.back(), DecodeGraphs::kMaxBatch);
  EXPECT_EQ(DecodeGraphs::capture_sizes(4096), all);  // batches above kMaxBatch are not recorded
  // Every batch pads to one of them.
  for (int64_t limit : {1, 3, 8, 100, 256, 300, 512}) {
    const std::vector<int64_t> sizes = DecodeGraphs::capture_sizes(limit);
    for (int64_t seqs = 1; seqs <= limit; ++seqs)
      EXPECT_TRUE(std::binary_search(sizes.begin(), sizes.end(), DecodeGraphs::capture_size(seqs, limit))) << seqs;
  }
  EXPECT_EQ(DecodeGraphs::seq_len_buckets(262144), (std::vector<int64_t>{256, 4096, 262144}));
  EXPECT_EQ(DecodeGraphs::seq_len_buckets(5000), (std::vector<int64_t>{256, 4096, 5000}));
  EXPECT_EQ(DecodeGraphs::seq_len_buckets(4097), (std::vector<int64_t>{256, 4096, 4097}));
  EXPECT_EQ(DecodeGraphs::seq_len_buckets(4096), (std::vector<int64_t>{256, 4096}));
  EXPECT_EQ(DecodeGraphs::seq_len_buckets(257), (std::vector<int64_t>{256, 257}));
  EXPECT_EQ(DecodeGraphs::seq_len_buckets(256), (std::vector<int64_t>{256}));
  EXPECT_EQ(DecodeGraphs::seq_len_buckets(128), (std::vector<int64_t>{128}));
}

// capture() runs the step op by op once and records it; later steps of the
// shape replay without recording again.
TEST(DecodeGraphs, CapturedShapesReplayFromTheirFirstStep) {
  StandInRecorder rec;
  DecodeGraphs g(rec.get(), 4096);
  CountingForward f;
  StepContext c = decode_ctx(4, 1);
  g.capture(c, f.fn());
  EXPECT_EQ(c.max_seq_len, 256);
  EXPECT_EQ(f.calls, 1);
  EXPECT_EQ(rec.recordings, 1);
  EXPECT_TRUE(g.ready(decode_ctx(4, 200)));
  EXPECT_FALSE(g.ready(decode_ctx(4, 300)));
  StepContext again = decode_ctx(4, 1);
  g.capture(again, f.fn());  // recorded already
  EXPECT_EQ(rec.recordings, 1);
  for (int i = 0; i < 3; ++i) {
    StepContext step = decode_ctx(4, 100 + i);
    g.run(step, f.fn());
  }
  EXPECT_EQ(rec.recordings, 1);
  EXPECT_EQ(g.replays(), 3);
  EXPECT_EQ(f.calls, 4);
  *rec.valid = false;
  EXPECT_FALSE(g.ready(decode_ctx(4, 1)));
  rec.fail = true;
  StepContext failing = decode_ctx(4, 1);
  g.capture(failing, f.fn());
  EXPECT_FALSE(g.enabled());
  EXPECT_EQ(g.size(), 0u);
}

// The runner: three sequences of different prompt lengths decode together,
// finishing at different steps (so the batch shrinks and several shapes are
// recorded); greedy tokens with replayed recordings equal those without.
std::vector<std::vector<int32_t>> run_batch(const GraphRecorder& recorder, int64_t* replays) {
  auto be = make_cpu_backend();
  RunnerOptions ro = test::small_runner_options();
  ro.record_graph = recorder;
  ModelRunner runner(load_model(test::tiny_model(), *be, test::small_model_options()), ro);
  runner.allocate_cache({.block_size = 16, .num_blocks = 32, .num_state_slots = 4});
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<std::vector<int32_t>> tokens = {{5, 17, 300, 42}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 100, 200}, {77}};
  const std::vector<int> steps = {12, 20, 6};  // decode steps per sequence
  std::vector<std::vector<int32_t>> tables = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}};
  std::vector<size_t> done(tokens.size(), 0);  // tokens already in the cache
  for (int step = 0; step < 21; ++step) {
    StepInput in;
    std::vector<size_t> which;
    for (size_t s = 0; s < tokens.size(); ++s) {
      if (step > steps[s]) continue;
      SeqWork w;
      w.seq_id = static_cast<int64_t>(s);
      w.token_ids = std::span<const int32_t>(tokens[s]).subspan(done[s]);
      w.start_pos = static_cast<int64_t>(done[s]);
      w.block_table = tables[s];
      w.state_slot = static_cast<int32_t>(s);
      w.sample = true;
      w.sampling = &greedy;
      w.prompt_ids = w.token_ids;
      in.seqs.push_back(w);
      which.push_back(s);
    }
    if (in.seqs.empty()) break;
    StepOutput out = runner.execute(in);
    for (size_t i = 0; i < which.size(); ++i) {
      done[which[i]] = tokens[which[i]].size();
      tokens[which[i]].push_back(out.sampled.at(i).token);
    }
  }
  *replays = runner.graph_replays();
  return tokens;
}

TEST(DecodeGraphs, RunnerTokensWithReplayedStepsEqualOpByOp) {
  int64_t replays_eager = 0, replays = 0;
  const auto eager = run_batch(nullptr, &replays_eager);
  StandInRecorder rec;
  const auto replayed = run_batch(rec.get(), &replays);
  EXPECT_EQ(replays_eager, 0);
  EXPECT_GT(rec.recordings, 2);
  EXPECT_GT(replays, 10);
  EXPECT_EQ(eager, replayed);
}

}  // namespace
}  // namespace hyllm
