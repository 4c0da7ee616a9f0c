// EngineCore::step() over an executor that returns a fixed token at once:
// what the engine thread spends per step on the host (the scheduler, the
// step's inputs, sampling bookkeeping, stop checks, the outputs) at vLLM's
// H200 defaults (1,024 sequences, 8,192 tokens a step), for decode steps of
// B running sequences and for mixed steps that also take prompt chunks. On a
// GPU the device idles for this long between two steps, since the next one
// is planned after the last one's tokens are back. BM_ClientThousandStreams
// adds what a server adds on the host: the same workload through an
// EngineClient, each request's outputs read by a thread of its own (as the
// server's connection threads read them), over an executor whose every step
// takes a fixed 10 ms as a device's would; a step's time past those 10 ms is
// the host work the device waits for.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_client.h"
#include "engine/engine_core.h"
#include "engine/executor.h"

namespace hyllm {
namespace {

constexpr int kVocab = 248320;
constexpr int32_t kToken = 1000;  // what every row samples: never an EOS or stop id

class NullExecutor : public ModelExecutor {
 public:
  CacheLayout cache_layout() const override { return {4096, 1 << 20, 10, 30}; }
  int vocab_size() const override { return kVocab; }
  size_t cache_memory_budget() override { return size_t{64} << 30; }
  void allocate_cache(const CacheAllocation&) override {}
  StepOutput execute(const StepInput& input) override {
    StepOutput out;
    for (const SeqWork& w : input.seqs) {
      if (!w.sample) continue;
      SampledToken t;
      t.token = kToken;
      out.sampled.push_back(std::move(t));
    }
    return out;
  }
};

// NullExecutor whose steps last kDeviceStep, the device's share of a step.
constexpr std::chrono::milliseconds kDeviceStep{10};
class DeviceTimeExecutor : public NullExecutor {
 public:
  StepOutput execute(const StepInput& input) override {
    std::this_thread::sleep_for(kDeviceStep);
    return NullExecutor::execute(input);
  }
};

EngineConfig h200_config() {
  EngineConfig c;
  c.max_num_seqs = 1024;
  c.max_num_batched_tokens = 8192;
  c.max_model_len = 8192;  // room for the timed decode steps
  c.eos_token_ids = {248044};
  return c;
}

EngineRequest request(int i, int prompt_len, int max_tokens, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> tok(0, kVocab - 1000);
  EngineRequest r;
  r.request_id = std::to_string(i);
  r.prompt_token_ids.resize(static_cast<size_t>(prompt_len));
  for (auto& t : r.prompt_token_ids) t = tok(rng);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

// B sequences decoding (their 1,024-token prompts computed beforehand).
void BM_DecodeStep(benchmark::State& st) {
  const int B = static_cast<int>(st.range(0));
  NullExecutor ex;
  EngineCore core(ex, h200_config());
  std::mt19937 rng(1);
  for (int i = 0; i < B; ++i) core.add_request(request(i, 1024, 1 << 20, rng));
  for (int s = 0; s < 2 * (B * 1024 / 8192 + 1); ++s) core.step();  // through the prompts
  for (auto _ : st) benchmark::DoNotOptimize(core.step());
  st.counters["us_per_seq"] = benchmark::Counter(B, benchmark::Counter::kIsIterationInvariantRate |
                                                        benchmark::Counter::kInvert);
}
// A fixed count of steps, fewer than the 7,168 tokens each sequence may still generate.
BENCHMARK(BM_DecodeStep)->Arg(1)->Arg(32)->Arg(256)->Arg(1000)->Iterations(2000)->Unit(benchmark::kMicrosecond);

// vLLM's throughput workload, 1,000 requests of 1,024 prompt tokens and 128
// outputs at once, from the first step to the last: the mean step.
void BM_ThousandPrompts(benchmark::State& st) {
  int64_t steps = 0;
  for (auto _ : st) {
    st.PauseTiming();
    NullExecutor ex;
    EngineCore core(ex, h200_config());
    std::mt19937 rng(2);
    for (int i = 0; i < 1000; ++i) core.add_request(request(i, 1024, 128, rng));
    st.ResumeTiming();
    while (core.has_unfinished_requests()) {
      benchmark::DoNotOptimize(core.step());
      ++steps;
    }
  }
  st.counters["steps"] = benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kAvgIterations);
  st.counters["us_per_step"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ThousandPrompts)->Unit(benchmark::kMillisecond)->Iterations(3);

// The same through an EngineClient with one reading thread per request.
void BM_ClientThousandStreams(benchmark::State& st) {
  int64_t steps = 0;
  for (auto _ : st) {
    st.PauseTiming();
    std::unique_ptr<EngineClient> client = make_engine_client(std::make_unique<DeviceTimeExecutor>(), h200_config());
    client->start();
    std::mt19937 rng(2);
    std::vector<EngineRequest> requests;
    for (int i = 0; i < 1000; ++i) requests.push_back(request(i, 1024, 128, rng));
    const uint64_t steps_before = client->stats().num_steps;
    st.ResumeTiming();
    std::vector<std::thread> readers;
    readers.reserve(requests.size());
    for (EngineRequest& r : requests) {
      readers.emplace_back([stream = client->submit(std::move(r))] {
        while (!stream->ended()) benchmark::DoNotOptimize(stream->next(std::chrono::milliseconds(1000)));
      });
    }
    for (std::thread& t : readers) t.join();
    st.PauseTiming();
    steps += static_cast<int64_t>(client->stats().num_steps - steps_before);
    client.reset();
    st.ResumeTiming();
  }
  st.counters["steps"] = benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kAvgIterations);
  st.counters["us_per_step"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  st.counters["device_us_per_step"] = std::chrono::duration<double, std::micro>(kDeviceStep).count();
}
BENCHMARK(BM_ClientThousandStreams)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

}  // namespace
}  // namespace hyllm
