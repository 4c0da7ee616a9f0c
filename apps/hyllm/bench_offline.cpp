#include "bench_offline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/stats.h"
#include "engine_setup.h"
#include "util/status.h"
#include "util/text_file.h"

namespace hyllm::app {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Prompts of random non-special ids: the offline benchmarks measure the
// engine, so no text round trip is needed.
std::vector<std::vector<int32_t>> random_prompts(int n, int len, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, std::max(1, vocab - 1));
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  for (auto& p : out) {
    p.resize(static_cast<size_t>(len));
    for (auto& t : p) t = id(rng);
  }
  return out;
}

int32_t usable_vocab(const InProcessEngine& e) {
  // Stay below the special tokens, which sit at the end of Qwen vocabularies.
  std::vector<int32_t> eos(e.engine->config().eos_token_ids);
  int32_t v = static_cast<int32_t>(e.model_config.vocab_size);
  for (int32_t id : eos) v = std::min(v, id);
  return v;
}

struct RequestTimes {
  std::vector<double> output_times;  // seconds from submit, one per output
  int tokens = 0;
};

// Submits every prompt at once and drains the streams; returns per-request
// output timestamps.
std::vector<RequestTimes> run_batch(EngineClient& engine, const std::vector<std::vector<int32_t>>& prompts,
                                    int output_len, const std::string& tag) {
  std::vector<EngineRequest> requests(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest& r = requests[i];
    r.request_id = fmt::format("{}-{}", tag, i);
    r.prompt_token_ids = prompts[i];
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = output_len;
    r.sampling.ignore_eos = true;
  }
  // At once, as vLLM's offline benchmarks add their batch: submitted one by
  // one, the first prompts could start a step of their own, and `bench
  // latency` would time two steps where it means one.
  const auto t0 = Clock::now();
  const std::vector<std::shared_ptr<ResponseStream>> streams = engine.submit_batch(std::move(requests));
  // One reader per stream, so each output is stamped when the engine emits it.
  std::vector<RequestTimes> times(prompts.size());
  std::vector<std::string> errors(prompts.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < streams.size(); ++i) {
    readers.emplace_back([&, i] {
      while (!streams[i]->ended()) {
        auto out = streams[i]->next(std::chrono::milliseconds(1000));
        if (!out) continue;
        times[i].output_times.push_back(seconds_since(t0));
        for (const auto& c : out->outputs) times[i].tokens += static_cast<int>(c.new_token_ids.size());
        if (!out->error_message.empty()) errors[i] = out->error_message;
      }
    });
  }
  for (auto& t : readers) t.join();
  for (const auto& e : errors)
    if (!e.empty()) fail(ErrorCode::kInternal, "request failed: {}", e);
  return times;
}

void setup_throughput(CLI::App& bench, int& exit_code) {
  static EngineFlags ef;
  static int input_len = 1024, output_len = 128, num_prompts = 100;
  static std::string output_json;
  CLI::App* sub = bench.add_subcommand("throughput", "Offline throughput of the engine in process (like `vllm bench throughput`)");
  add_engine_flags(*sub, ef);
  sub->add_option("--input-len", input_len)->capture_default_str();
  sub->add_option("--output-len", output_len)->capture_default_str();
  sub->add_option("--num-prompts", num_prompts)->capture_default_str();
  sub->add_option("--output-json", output_json, "Write the results as JSON");
  sub->callback([&exit_code] {
    if (input_len < 1 || output_len < 1 || num_prompts < 1)
      fail(ErrorCode::kInvalidArgument, "--input-len, --output-len and --num-prompts must be positive");
    InProcessEngine e = build_engine(ef);
    auto prompts = random_prompts(num_prompts, input_len, usable_vocab(e), ef.seed);
    const auto t0 = Clock::now();
    auto times = run_batch(*e.engine, prompts, output_len, "throughput");
    const double elapsed = seconds_since(t0);
    long long out_tokens = 0;
    for (const auto& t : times) out_tokens += t.tokens;
    const long long total = out_tokens + static_cast<long long>(num_prompts) * input_len;
    std::cout << fmt::format(
        "Throughput: {:.2f} requests/s, {:.2f} total tokens/s, {:.2f} output tokens/s\n"
        "Total num prompt tokens:  {}\nTotal num output tokens:  {}\n",
        num_prompts / elapsed, total / elapsed, out_tokens / elapsed, static_cast<long long>(num_prompts) * input_len,
        out_tokens);
    if (!output_json.empty()) {
      nlohmann::json j = {{"elapsed_time", elapsed}, {"num_requests", num_prompts},
                          {"total_num_tokens", total}, {"requests_per_second", num_prompts / elapsed},
                          {"tokens_per_second", total / elapsed}, {"output_tokens_per_second", out_tokens / elapsed}};
      write_text_file(output_json, j.dump(2) + "\n");
    }
    exit_code = 0;
  });
}

void setup_latency(CLI::App& bench, int& exit_code) {
  static EngineFlags ef;
  static int input_len = 32, output_len = 128, batch_size = 8, warmup = 2, iters = 5;
  static std::string output_json;
  CLI::App* sub = bench.add_subcommand("latency", "Latency of one batch: prefill and per-step decode (like `vllm bench latency`)");
  add_engine_flags(*sub, ef);
  sub->add_option("--input-len", input_len)->capture_default_str();
  sub->add_option("--output-len", output_len)->capture_default_str();
  sub->add_option("--batch-size", batch_size)->capture_default_str();
  sub->add_option("--num-iters-warmup", warmup)->capture_default_str();
  sub->add_option("--num-iters", iters)->capture_default_str();
  sub->add_option("--output-json", output_json, "Write the results as JSON");
  sub->callback([&exit_code] {
    if (input_len < 1 || output_len < 2 || batch_size < 1 || iters < 1)
      fail(ErrorCode::kInvalidArgument, "--input-len, --batch-size, --num-iters must be positive; --output-len at least 2");
    InProcessEngine e = build_engine(ef);
    std::vector<double> latencies, prefills, steps;
    ExecutorTimes before;
    for (int it = -warmup; it < iters; ++it) {
      if (it == 0) before = e.executor->times();
      // New prompts each iteration: the same ones would hit the prefix cache
      // from the second iteration on, and the prefill would measure a lookup.
      const auto prompts =
          random_prompts(batch_size, input_len, usable_vocab(e), ef.seed + static_cast<uint64_t>(it + warmup));
      auto times = run_batch(*e.engine, prompts, output_len, fmt::format("latency{}", it));
      if (it < 0) continue;
      double end = 0, first = 0;
      for (const auto& t : times) {
        end = std::max(end, t.output_times.back());
        first = std::max(first, t.output_times.front());
      }
      latencies.push_back(end);
      prefills.push_back(first);  // every prompt has produced its first token
      const auto& t0 = times[0].output_times;
      for (size_t i = 1; i < t0.size(); ++i) steps.push_back(t0[i] - t0[i - 1]);
    }
    using bench::mean;
    using bench::percentile;
    std::cout << fmt::format("Avg latency: {:.4f} seconds\n", mean(latencies));
    for (double p : {10.0, 25.0, 50.0, 75.0, 90.0, 99.0})
      std::cout << fmt::format("{}% percentile latency: {:.4f} seconds\n", p, percentile(latencies, p));
    std::cout << fmt::format("Prefill (batch {} x {} tokens): mean {:.2f} ms, median {:.2f} ms\n", batch_size,
                             input_len, mean(prefills) * 1e3, percentile(prefills, 50) * 1e3);
    std::cout << fmt::format("Decode step (batch {}): mean {:.3f} ms, median {:.3f} ms, p99 {:.3f} ms\n", batch_size,
                             mean(steps) * 1e3, percentile(steps, 50) * 1e3, percentile(steps, 99) * 1e3);
    // Speculative decoding: the executor's own split of its generation steps
    // into the target (verify) step and the MTP draft passes.
    const ExecutorTimes after = e.executor->times();
    const int64_t n_steps = after.steps - before.steps;
    const double target_ms = n_steps ? (after.target_s - before.target_s) * 1e3 / n_steps : 0.0;
    const double draft_ms = n_steps ? (after.draft_s - before.draft_s) * 1e3 / n_steps : 0.0;
    if (draft_ms > 0)
      std::cout << fmt::format("Generation steps: {}, mean {:.3f} ms target (verify) + {:.3f} ms MTP drafts\n",
                               n_steps, target_ms, draft_ms);
    if (!output_json.empty()) {
      nlohmann::json j = {{"avg_latency", mean(latencies)}, {"latencies", latencies},
                          {"prefill_ms_median", percentile(prefills, 50) * 1e3},
                          {"decode_step_ms_median", percentile(steps, 50) * 1e3}, {"batch_size", batch_size},
                          {"executor_steps", n_steps}, {"executor_target_ms_mean", target_ms},
                          {"executor_draft_ms_mean", draft_ms},
                          {"input_len", input_len}, {"output_len", output_len}};
      for (double p : {10.0, 25.0, 50.0, 75.0, 90.0, 99.0})
        j["percentiles"][fmt::format("{}", static_cast<int>(p))] = percentile(latencies, p);
      write_text_file(output_json, j.dump(2) + "\n");
    }
    exit_code = 0;
  });
}

}  // namespace

void add_offline_bench_commands(CLI::App& bench, int& exit_code) {
  setup_throughput(bench, exit_code);
  setup_latency(bench, exit_code);
}

}  // namespace hyllm::app
