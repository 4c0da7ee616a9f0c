#include "bench/load_generator.h"

#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <semaphore>
#include <thread>

#include "util/status.h"

namespace hyllm::bench {

std::vector<double> arrival_offsets(int n, const LoadOptions& opt) {
  if (!(opt.request_rate > 0.0)) fail(ErrorCode::kInvalidArgument, "--request-rate must be positive");
  if (!(opt.burstiness > 0.0)) fail(ErrorCode::kInvalidArgument, "--burstiness must be positive");
  std::vector<double> t(static_cast<size_t>(std::max(n, 0)), 0.0);
  if (std::isinf(opt.request_rate) || n == 0) return t;
  std::mt19937_64 rng(opt.seed);
  if (std::isinf(opt.burstiness)) {
    for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = 1.0 / opt.request_rate;
  } else {
    std::gamma_distribution<double> gap(opt.burstiness, 1.0 / (opt.request_rate * opt.burstiness));
    for (auto& v : t) v = gap(rng);
  }
  for (size_t i = 1; i < t.size(); ++i) t[i] += t[i - 1];
  // Rescale so the run lasts exactly N / rate: the raw sum of random gaps is a
  // few percent off, which would move throughput between seeds.
  double target = n / opt.request_rate;
  if (t.back() > 0.0) {
    double f = target / t.back();
    for (auto& v : t) v *= f;
  }
  return t;
}

LoadRun run_load(const std::vector<RequestInput>& inputs, const LoadOptions& opt, const SendFn& send) {
  const int n = static_cast<int>(inputs.size());
  std::vector<double> offsets = arrival_offsets(n, opt);
  if (opt.max_concurrency && *opt.max_concurrency <= 0)
    fail(ErrorCode::kInvalidArgument, "--max-concurrency must be positive");
  const std::ptrdiff_t slots = opt.max_concurrency ? *opt.max_concurrency : std::max(n, 1);
  std::counting_semaphore<> semaphore(slots);

  LoadRun run;
  run.results.resize(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  const double start = now_s();
  for (int i = 0; i < n; ++i) {
    double wait = start + offsets[static_cast<size_t>(i)] - now_s();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    double arrival = now_s();
    threads.emplace_back([&, i, arrival] {
      semaphore.acquire();
      RequestResult r;
      try {
        r = send(inputs[static_cast<size_t>(i)]);
      } catch (const std::exception& e) {
        r.success = false;
        r.error = e.what();
      }
      semaphore.release();
      if (r.start_time == 0.0) r.start_time = arrival;
      r.client_queue_time = r.start_time - arrival;
      run.results[static_cast<size_t>(i)] = std::move(r);
    });
  }
  for (auto& t : threads) t.join();
  run.duration_s = now_s() - start;
  return run;
}

}  // namespace hyllm::bench
