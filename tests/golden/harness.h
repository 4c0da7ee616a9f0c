#pragma once
// Test harness: runs sequences through a ModelRunner the way the engine
// would (flat steps over all live sequences, each at its own position,
// chunked prefill, one token per decode step), optionally teacher-forced.

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"

namespace hyllm::testing {

inline std::filesystem::path tiny_model_dir(const std::string& name) {
  return std::filesystem::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / name;
}

struct SeqRun {
  std::vector<int32_t> prompt;
  int max_new = 0;
  // Prompt chunk sizes in order; the last one repeats. Empty: the whole prompt in one step.
  std::vector<int> chunks;
  // When set, the tokens fed after each sample (the sampled ones are still recorded).
  std::vector<int32_t> forced;
};

struct SeqResult {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // one row per sampled token
};

class Harness {
 public:
  static constexpr int kMaxSeqs = 8;
  static constexpr int kMaxLen = 512;
  static constexpr int kBlockSize = 16;

  // Makes the runner's device sampler for the backend; empty: host sampling.
  using SamplerFactory = std::function<std::shared_ptr<DeviceSampler>(Backend&)>;

  // Makes the runner's decode-graph recorder for the backend; empty: none.
  using RecorderFactory = std::function<GraphRecorder(Backend&)>;

  // Adjusts the model options (KV cache dtype, online quantisation); empty: defaults.
  using ModelSetup = std::function<void(ModelOptions&)>;

  explicit Harness(const std::filesystem::path& model_dir, std::unique_ptr<Backend> backend = make_cpu_backend(),
                   int64_t max_tokens = 1024, const SamplerFactory& make_sampler = {},
                   const RecorderFactory& make_recorder = {}, const ModelSetup& setup = {})
      : backend_(std::move(backend)) {
    ModelOptions mo;
    mo.max_num_tokens = max_tokens;
    mo.max_num_seqs = kMaxSeqs;
    if (setup) setup(mo);
    RunnerOptions ro;
    ro.max_num_tokens = max_tokens;
    ro.max_num_seqs = kMaxSeqs;
    ro.max_model_len = kMaxLen;
    ro.keep_logits = true;  // results carry every sampled row's logits
    if (make_sampler) ro.device_sampler = make_sampler(*backend_);
    if (make_recorder) ro.record_graph = make_recorder(*backend_);
    runner_ = std::make_unique<ModelRunner>(load_model(model_dir, *backend_, mo), ro);
    // Padded decode steps (with a recorder) own a reserved block and slot after the sequences'.
    const CacheLayout layout = runner_->cache_layout();
    runner_->allocate_cache({kBlockSize, kMaxSeqs * blocks_per_seq() + layout.reserved_blocks,
                             kMaxSeqs + layout.reserved_state_slots});
  }

  static int blocks_per_seq() { return kMaxLen / kBlockSize; }
  ModelRunner& runner() { return *runner_; }
  Backend& backend() { return *backend_; }

  // Runs all sequences concurrently, each step taking every live sequence's
  // next chunk (or its next single token).
  std::vector<SeqResult> run(const std::vector<SeqRun>& seqs) {
    struct Live {
      std::vector<int32_t> tokens;  // known tokens: prompt, then fed ones
      int64_t pos = 0;              // tokens computed
      size_t chunk_index = 0;
      std::vector<int32_t> table;
      bool done = false;
    };
    std::vector<Live> live(seqs.size());
    std::vector<SeqResult> results(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      live[i].tokens = seqs[i].prompt;
      for (int b = 0; b < blocks_per_seq(); ++b) live[i].table.push_back(static_cast<int32_t>(i) * blocks_per_seq() + b);
      live[i].done = seqs[i].max_new == 0;
    }
    SamplingParams greedy;
    greedy.temperature = 0;
    for (;;) {
      StepInput in;
      std::vector<size_t> who;
      for (size_t i = 0; i < seqs.size(); ++i) {
        Live& l = live[i];
        if (l.done) continue;
        int64_t left = static_cast<int64_t>(l.tokens.size()) - l.pos;
        int64_t n = left;
        if (l.pos < static_cast<int64_t>(seqs[i].prompt.size()) && !seqs[i].chunks.empty()) {
          size_t ci = std::min(l.chunk_index, seqs[i].chunks.size() - 1);
          n = std::min<int64_t>(left, seqs[i].chunks[ci]);
          ++l.chunk_index;
        }
        SeqWork w;
        w.seq_id = static_cast<int64_t>(i);
        w.token_ids = std::span<const int32_t>(l.tokens.data() + l.pos, n);
        w.start_pos = static_cast<int32_t>(l.pos);
        w.block_table = l.table;
        w.state_slot = static_cast<int32_t>(i);
        w.sample = l.pos + n == static_cast<int64_t>(l.tokens.size());
        w.sampling = &greedy;
        in.seqs.push_back(w);
        who.push_back(i);
        l.pos += n;
      }
      if (in.seqs.empty()) break;
      StepOutput out = runner_->execute(in);
      const auto& logits = runner_->last_logits();
      const int64_t V = runner_->vocab_size();
      size_t row = 0;
      for (size_t k = 0; k < who.size(); ++k) {
        if (!in.seqs[k].sample) continue;
        size_t i = who[k];
        SeqResult& r = results[i];
        r.tokens.push_back(out.sampled[row].token);
        r.logits.emplace_back(logits.begin() + row * V, logits.begin() + (row + 1) * V);
        ++row;
        const size_t produced = r.tokens.size();
        if (static_cast<int>(produced) >= seqs[i].max_new) {
          live[i].done = true;
        } else {
          live[i].tokens.push_back(seqs[i].forced.empty() ? r.tokens.back() : seqs[i].forced[produced - 1]);
        }
      }
    }
    return results;
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ModelRunner> runner_;
};

inline float top_margin(const std::vector<float>& row) {
  float a = -1e30f, b = -1e30f;
  for (float v : row) {
    if (v > a) {
      b = a;
      a = v;
    } else if (v > b) {
      b = v;
    }
  }
  return a - b;
}

}  // namespace hyllm::testing
