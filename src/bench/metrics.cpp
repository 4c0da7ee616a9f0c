#include "bench/metrics.h"

#include <algorithm>
#include <cmath>

#include "bench/stats.h"
#include "util/status.h"

namespace hyllm::bench {
namespace {

Distribution summarize(const std::vector<double>& seconds, const std::vector<double>& percentiles) {
  Distribution d;
  d.mean_ms = mean(seconds) * 1000.0;
  d.median_ms = median(seconds) * 1000.0;
  d.std_ms = stddev(seconds) * 1000.0;
  for (double p : percentiles) d.percentiles_ms.emplace_back(p, percentile(seconds, p) * 1000.0);
  return d;
}

}  // namespace

BenchmarkMetrics calculate_metrics(const std::vector<RequestResult>& results, double duration_s,
                                   const std::vector<double>& percentiles, const GoodputSlo& goodput) {
  BenchmarkMetrics m;
  std::vector<double> ttfts, tpots, all_tpots, itls, e2els;
  for (const auto& r : results) {
    if (!r.success) {
      m.output_lens.push_back(0);
      ++m.failed;
      continue;
    }
    int out = r.output_tokens > 0 ? r.output_tokens : static_cast<int>(r.itl.size()) + 1;
    m.output_lens.push_back(out);
    m.total_input += r.prompt_len;
    m.total_cached += r.cached_tokens;
    double tpot = 0.0;  // a one-token request counts as tpot 0 for goodput
    if (out > 1) {
      tpot = (r.latency - r.ttft) / static_cast<double>(out - 1);
      tpots.push_back(tpot);
    }
    all_tpots.push_back(tpot);
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
    ttfts.push_back(r.ttft);
    e2els.push_back(r.latency);
    ++m.completed;
  }
  for (int n : m.output_lens) m.total_output += n;

  int good = 0;
  if (!goodput.empty()) {
    for (size_t i = 0; i < ttfts.size(); ++i) {
      bool ok = true;
      if (auto it = goodput.find("ttft"); it != goodput.end()) ok &= ttfts[i] <= it->second / 1000.0;
      if (auto it = goodput.find("tpot"); it != goodput.end()) ok &= all_tpots[i] <= it->second / 1000.0;
      if (auto it = goodput.find("e2el"); it != goodput.end()) ok &= e2els[i] <= it->second / 1000.0;
      good += ok ? 1 : 0;
    }
  }

  // Peak output tokens per second in one-second buckets from the first send,
  // and the peak number of requests in flight (half-open intervals).
  double t0 = 1e300, t1 = -1e300;
  for (const auto& r : results) {
    if (!r.success) continue;
    t0 = std::min(t0, r.start_time);
    t1 = std::max(t1, r.start_time + r.latency);
  }
  if (m.completed > 0) {
    size_t buckets = static_cast<size_t>(std::ceil(t1 - t0)) + 1;
    std::vector<double> per_second(buckets, 0.0);
    std::vector<std::pair<double, int>> events;
    for (const auto& r : results) {
      if (!r.success) continue;
      double t = r.start_time + r.ttft;
      auto add = [&](double when) {
        auto b = static_cast<long long>(when - t0);
        if (b >= 0 && static_cast<size_t>(b) < buckets) per_second[static_cast<size_t>(b)] += 1.0;
      };
      add(t);
      for (double gap : r.itl) add(t += gap);
      events.emplace_back(r.start_time, 1);
      events.emplace_back(r.start_time + r.latency, -1);
    }
    std::sort(events.begin(), events.end());
    int cur = 0;
    for (const auto& e : events) m.max_concurrent_requests = std::max(m.max_concurrent_requests, cur += e.second);
    m.max_output_tokens_per_s = *std::max_element(per_second.begin(), per_second.end());
  }

  m.request_throughput = m.completed / duration_s;
  m.request_goodput = good / duration_s;
  m.output_throughput = static_cast<double>(m.total_output) / duration_s;
  m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
  m.ttft = summarize(ttfts, percentiles);
  m.tpot = summarize(tpots, percentiles);
  m.itl = summarize(itls, percentiles);
  m.e2el = summarize(e2els, percentiles);
  return m;
}

GoodputSlo parse_goodput(const std::vector<std::string>& pairs) {
  GoodputSlo slo;
  for (const auto& p : pairs) {
    auto colon = p.find(':');
    if (colon == std::string::npos)
      fail(ErrorCode::kInvalidArgument,
           "invalid --goodput '{}': specify service level objectives as KEY:VALUE pairs, "
           "the value a number of milliseconds", p);
    std::string key = p.substr(0, colon);
    if (key != "ttft" && key != "tpot" && key != "e2el")
      fail(ErrorCode::kInvalidArgument, "invalid --goodput metric '{}': one of ttft, tpot, e2el", key);
    double v;
    try {
      size_t used = 0;
      v = std::stod(p.substr(colon + 1), &used);
      if (used != p.size() - colon - 1) throw std::invalid_argument("trailing");
    } catch (...) {
      fail(ErrorCode::kInvalidArgument, "invalid --goodput value in '{}'", p);
    }
    if (v < 0) fail(ErrorCode::kInvalidArgument, "--goodput value must be non-negative: '{}'", p);
    slo[key] = v;
  }
  return slo;
}

}  // namespace hyllm::bench
