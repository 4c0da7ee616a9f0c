#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "bench/load_generator.h"
#include "bench/metrics.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "util/status.h"

namespace hyllm::bench {

// Expected values computed with numpy 2.x.
TEST(Stats, MatchesNumpy) {
  std::vector<double> x{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(mean(x), 2.5);
  EXPECT_DOUBLE_EQ(median(x), 2.5);
  EXPECT_NEAR(stddev(x), 1.118033988749895, 1e-15);
  EXPECT_NEAR(percentile(x, 99), 3.97, 1e-12);
  EXPECT_NEAR(percentile(x, 90), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(x, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(x, 100), 4.0);
  EXPECT_DOUBLE_EQ(mean({}), 0.0);
  EXPECT_DOUBLE_EQ(percentile({}, 99), 0.0);
  EXPECT_DOUBLE_EQ(median({7}), 7.0);
}

RequestResult ok(double start, double ttft, std::vector<double> itl, int prompt, int out) {
  RequestResult r;
  r.success = true;
  r.start_time = start;
  r.ttft = ttft;
  r.itl = itl;
  double last = ttft;
  for (double g : itl) last += g;
  r.latency = last;
  r.prompt_len = prompt;
  r.output_tokens = out;
  return r;
}

TEST(Metrics, ExactValuesForScriptedRequests) {
  // Request A: 4 tokens, TTFT 0.5 s, then 0.1 s gaps -> E2EL 0.8, TPOT 0.1.
  // Request B: 2 tokens, TTFT 1.0 s, gap 0.3 -> E2EL 1.3, TPOT 0.3.
  // Request C: failed.
  std::vector<RequestResult> rs{ok(0.0, 0.5, {0.1, 0.1, 0.1}, 10, 4), ok(0.2, 1.0, {0.3}, 20, 2), {}};
  rs[2].error = "HTTP 500";
  BenchmarkMetrics m = calculate_metrics(rs, 2.0, {50, 99}, {{"ttft", 600}});
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 30);
  EXPECT_EQ(m.total_output, 6);
  EXPECT_EQ(m.output_lens, (std::vector<int>{4, 2, 0}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 18.0);
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.5);  // only A meets TTFT <= 600 ms
  EXPECT_NEAR(m.ttft.mean_ms, 750.0, 1e-9);
  EXPECT_NEAR(m.tpot.mean_ms, 200.0, 1e-9);
  EXPECT_NEAR(m.tpot.median_ms, 200.0, 1e-9);
  EXPECT_NEAR(m.itl.mean_ms, 150.0, 1e-9);        // 0.1, 0.1, 0.1, 0.3
  EXPECT_NEAR(m.itl.percentiles_ms[0].second, 100.0, 1e-9);
  EXPECT_NEAR(m.e2el.mean_ms, 1050.0, 1e-9);
  EXPECT_EQ(m.max_concurrent_requests, 2);
  // Tokens at 0.5, 0.6, 0.7, 0.8 (A) and 1.2, 1.5 (B): 4 in the first second.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 4.0);
}

TEST(Metrics, SingleTokenRequestsHaveNoTpot) {
  std::vector<RequestResult> rs{ok(0.0, 0.25, {}, 5, 1)};
  BenchmarkMetrics m = calculate_metrics(rs, 1.0, {99}, {{"tpot", 0}});
  EXPECT_DOUBLE_EQ(m.tpot.mean_ms, 0.0);
  EXPECT_DOUBLE_EQ(m.request_goodput, 1.0);  // tpot counts as 0 for goodput
}

TEST(Metrics, ParseGoodput) {
  auto slo = parse_goodput({"ttft:500", "e2el:1e3"});
  EXPECT_DOUBLE_EQ(slo["ttft"], 500.0);
  EXPECT_DOUBLE_EQ(slo["e2el"], 1000.0);
  EXPECT_THROW(parse_goodput({"ttfb:5"}), Error);
  EXPECT_THROW(parse_goodput({"ttft"}), Error);
  EXPECT_THROW(parse_goodput({"ttft:-1"}), Error);
  EXPECT_THROW(parse_goodput({"ttft:5ms"}), Error);
}

TEST(Report, LayoutAndKeysLikeVllm) {
  std::vector<RequestResult> rs{ok(0.0, 0.5, {0.1}, 10, 2)};
  BenchmarkMetrics m = calculate_metrics(rs, 1.0, {99}, {});
  ReportContext ctx;
  ctx.max_concurrency = 4;
  ctx.duration_s = 1.0;
  std::string s = format_report(m, ctx);
  EXPECT_NE(s.find("============ Serving Benchmark Result ============"), std::string::npos);
  EXPECT_NE(s.find("Successful requests:                     1"), std::string::npos);
  EXPECT_NE(s.find("Maximum request concurrency:             4"), std::string::npos);
  EXPECT_NE(s.find("---------------Time to First Token----------------"), std::string::npos);
  EXPECT_NE(s.find("P99 ITL (ms):"), std::string::npos);
  EXPECT_EQ(s.find("E2EL"), std::string::npos);  // not selected by default
  auto j = result_json(m, ctx, rs);
  for (const char* k : {"completed", "duration", "mean_ttft_ms", "median_tpot_ms", "p99_itl_ms",
                        "output_throughput", "total_token_throughput", "ttfts", "itls", "output_lens"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(percentile_word(99.9), "99.9");
  EXPECT_EQ(percentile_word(50), "50");
}

TEST(Arrivals, InfiniteRateSendsAllAtOnce) {
  auto t = arrival_offsets(5, {});
  for (double v : t) EXPECT_EQ(v, 0.0);
}

TEST(Arrivals, FiniteRateEndsAtNOverRate) {
  LoadOptions o;
  o.request_rate = 4.0;
  o.seed = 7;
  auto t = arrival_offsets(100, o);
  EXPECT_NEAR(t.back(), 25.0, 1e-9);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GE(t[i], t[i - 1]);
  o.burstiness = 0.5;  // gamma, burstier: still rescaled to the same end
  auto g = arrival_offsets(100, o);
  EXPECT_NEAR(g.back(), 25.0, 1e-9);
  EXPECT_NE(g[10], t[10]);
  o.burstiness = std::numeric_limits<double>::infinity();  // constant gaps
  auto c = arrival_offsets(4, o);
  EXPECT_NEAR(c[0], 0.25, 1e-12);
  EXPECT_NEAR(c[3], 1.0, 1e-12);
  o.request_rate = 0;
  EXPECT_THROW(arrival_offsets(3, o), Error);
}

TEST(LoadGenerator, ConcurrencyBoundIsNeverExceeded) {
  std::atomic<int> in_flight{0}, peak{0};
  std::vector<RequestInput> inputs(12);
  LoadOptions o;
  o.max_concurrency = 3;
  LoadRun run = run_load(inputs, o, [&](const RequestInput&) {
    int now = ++in_flight;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    RequestResult r;
    r.start_time = now_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --in_flight;
    r.success = true;
    return r;
  });
  EXPECT_EQ(peak.load(), 3);
  ASSERT_EQ(run.results.size(), 12u);
  double queued = 0;
  for (const auto& r : run.results) queued += r.client_queue_time;
  EXPECT_GT(queued, 0.0);  // later requests waited for a slot
}

TEST(LoadGenerator, ExceptionsBecomeFailedRequests) {
  std::vector<RequestInput> inputs(3);
  LoadRun run = run_load(inputs, {}, [](const RequestInput&) -> RequestResult { throw std::runtime_error("boom"); });
  for (const auto& r : run.results) {
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error, "boom");
  }
}

}  // namespace hyllm::bench
