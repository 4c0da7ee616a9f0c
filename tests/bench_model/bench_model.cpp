// Model steps of models/hyllm-tiny (or HYLLM_MODEL_DIR) through the
// ModelRunner on the CPU backend:
//   BM_Prefill/N       one step computing an N-token prompt (items = tokens);
//   BM_Decode/B        one decode step of B sequences at position 256 (items = tokens).
// Threads: HYLLM_NUM_THREADS (default: one per core).

#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/runner/model_runner.h"
#include "model/model.h"
#include "util/env.h"

namespace hyllm {
namespace {

constexpr int kBlockSize = 16;
constexpr int kMaxLen = 1024;
constexpr int kMaxSeqs = 16;

struct Bench {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<ModelRunner> runner;
  SamplingParams greedy;
  std::vector<std::vector<int32_t>> tables;

  Bench() {
    std::filesystem::path dir = env().default_model_dir
                                    ? std::filesystem::path(*env().default_model_dir)
                                    : std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny";
    ModelOptions mo;
    mo.max_num_tokens = kMaxLen;
    mo.max_num_seqs = kMaxSeqs;
    RunnerOptions ro;
    ro.max_num_tokens = kMaxLen;
    ro.max_num_seqs = kMaxSeqs;
    ro.max_model_len = kMaxLen;
    runner = std::make_unique<ModelRunner>(load_model(dir, *backend, mo), ro);
    const int per_seq = kMaxLen / kBlockSize;
    runner->allocate_cache({kBlockSize, kMaxSeqs * per_seq, kMaxSeqs});
    for (int s = 0; s < kMaxSeqs; ++s) {
      tables.emplace_back();
      for (int b = 0; b < per_seq; ++b) tables.back().push_back(s * per_seq + b);
    }
    greedy.temperature = 0;
  }

  SeqWork work(int seq, const std::vector<int32_t>& tokens, int start) {
    SeqWork w;
    w.seq_id = seq;
    w.token_ids = tokens;
    w.start_pos = start;
    w.block_table = tables[seq];
    w.state_slot = seq;
    w.sample = true;
    w.sampling = &greedy;
    return w;
  }

  static Bench& get() {
    static Bench b;
    return b;
  }
};

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7919 + salt * 104729) % 4000 + 100;
  return t;
}

void BM_Prefill(benchmark::State& state) {
  Bench& b = Bench::get();
  auto prompt = tokens(static_cast<int>(state.range(0)), 1);
  for (auto _ : state) {
    StepInput in;
    in.seqs.push_back(b.work(0, prompt, 0));
    benchmark::DoNotOptimize(b.runner->execute(in));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Prefill)->Arg(16)->Arg(128)->Arg(512)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  Bench& b = Bench::get();
  const int batch = static_cast<int>(state.range(0));
  const int context = 256;
  // Fill each sequence's cache and state up to `context` once, as many
  // sequences per step as fit.
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < batch; ++s) prompts.push_back(tokens(context, s));
  for (int s = 0; s < batch;) {
    StepInput in;
    for (int used = 0; s < batch && used + context <= kMaxLen; ++s, used += context)
      in.seqs.push_back(b.work(s, prompts[s], 0));
    b.runner->execute(in);
  }
  std::vector<std::vector<int32_t>> next(batch, std::vector<int32_t>{42});
  for (auto _ : state) {
    // Re-decodes position `context` each time: same work as the next real step.
    StepInput in;
    for (int s = 0; s < batch; ++s) in.seqs.push_back(b.work(s, next[s], context));
    benchmark::DoNotOptimize(b.runner->execute(in));
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_Decode)->Arg(1)->Arg(4)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hyllm
