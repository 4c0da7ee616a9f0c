#include "bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hyllm::bench {
namespace {

void line(std::string& s, const std::string& label, const std::string& value) {
  s += fmt::format("{:<40} {:<10}\n", label, value);
}
std::string f2(double v) { return fmt::format("{:.2f}", v); }
std::string banner(const std::string& title, char c) {
  size_t n = 50, t = title.size();
  if (t >= n) return title + "\n";
  size_t left = (n - t) / 2, right = n - t - left;
  return std::string(left, c) + title + std::string(right, c) + "\n";
}

struct MetricName {
  const char* key;
  const char* name;
  const char* header;
  const Distribution BenchmarkMetrics::*field;
};
constexpr MetricName kMetrics[] = {
    {"ttft", "TTFT", "Time to First Token", &BenchmarkMetrics::ttft},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)", &BenchmarkMetrics::tpot},
    {"itl", "ITL", "Inter-token Latency", &BenchmarkMetrics::itl},
    {"e2el", "E2EL", "End-to-end Latency", &BenchmarkMetrics::e2el},
};

bool selected(const ReportContext& ctx, const char* key) {
  return std::find(ctx.percentile_metrics.begin(), ctx.percentile_metrics.end(), key) != ctx.percentile_metrics.end();
}

}  // namespace

std::string percentile_word(double p) {
  if (std::floor(p) == p) return fmt::format("{}", static_cast<long long>(p));
  return fmt::format("{}", p);
}

std::string format_report(const BenchmarkMetrics& m, const ReportContext& ctx) {
  std::string s = banner(" Serving Benchmark Result ", '=');
  line(s, "Successful requests:", std::to_string(m.completed));
  line(s, "Failed requests:", std::to_string(m.failed));
  if (ctx.max_concurrency) line(s, "Maximum request concurrency:", std::to_string(*ctx.max_concurrency));
  if (!std::isinf(ctx.request_rate)) line(s, "Request rate configured (RPS):", f2(ctx.request_rate));
  line(s, "Benchmark duration (s):", f2(ctx.duration_s));
  line(s, "Total input tokens:", std::to_string(m.total_input));
  line(s, "Total generated tokens:", std::to_string(m.total_output));
  if (m.total_cached > 0) {
    line(s, "Cached prompt tokens (server usage):", std::to_string(m.total_cached));
    line(s, "Prefix cache hit rate (%):", f2(100.0 * static_cast<double>(m.total_cached) / m.total_input));
  }
  line(s, "Request throughput (req/s):", f2(m.request_throughput));
  if (ctx.goodput) line(s, "Request goodput (req/s):", f2(m.request_goodput));
  line(s, "Output token throughput (tok/s):", f2(m.output_throughput));
  line(s, "Peak output token throughput (tok/s):", f2(m.max_output_tokens_per_s));
  line(s, "Peak concurrent requests:", f2(m.max_concurrent_requests));
  line(s, "Total token throughput (tok/s):", f2(m.total_token_throughput));
  for (const auto& mn : kMetrics) {
    if (!selected(ctx, mn.key)) continue;
    const Distribution& d = m.*(mn.field);
    s += banner(mn.header, '-');
    line(s, fmt::format("Mean {} (ms):", mn.name), f2(d.mean_ms));
    line(s, fmt::format("Median {} (ms):", mn.name), f2(d.median_ms));
    for (const auto& [p, v] : d.percentiles_ms) line(s, fmt::format("P{} {} (ms):", percentile_word(p), mn.name), f2(v));
  }
  s += std::string(50, '=') + "\n";
  return s;
}

nlohmann::json result_json(const BenchmarkMetrics& m, const ReportContext& ctx,
                           const std::vector<RequestResult>& results) {
  nlohmann::json j;
  j["duration"] = ctx.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["total_cached_tokens"] = m.total_cached;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = ctx.goodput ? nlohmann::json(m.request_goodput) : nlohmann::json(nullptr);
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  j["max_concurrency"] = ctx.max_concurrency ? nlohmann::json(*ctx.max_concurrency) : nlohmann::json(nullptr);
  j["request_rate"] = std::isinf(ctx.request_rate) ? nlohmann::json("inf") : nlohmann::json(ctx.request_rate);
  auto& input_lens = j["input_lens"] = nlohmann::json::array();
  auto& ttfts = j["ttfts"] = nlohmann::json::array();
  auto& itls = j["itls"] = nlohmann::json::array();
  auto& latencies = j["latencies"] = nlohmann::json::array();
  auto& starts = j["start_times"] = nlohmann::json::array();
  auto& queues = j["queue_times"] = nlohmann::json::array();
  auto& texts = j["generated_texts"] = nlohmann::json::array();
  auto& errors = j["errors"] = nlohmann::json::array();
  auto& cached = j["cached_tokens"] = nlohmann::json::array();
  for (const auto& r : results) {
    input_lens.push_back(r.prompt_len);
    ttfts.push_back(r.ttft);
    itls.push_back(r.itl);
    latencies.push_back(r.latency);
    starts.push_back(r.start_time);
    queues.push_back(r.client_queue_time);
    texts.push_back(r.generated_text);
    errors.push_back(r.error);
    cached.push_back(r.cached_tokens);
  }
  j["output_lens"] = m.output_lens;
  for (const auto& mn : kMetrics) {
    if (!selected(ctx, mn.key)) continue;
    const Distribution& d = m.*(mn.field);
    j[fmt::format("mean_{}_ms", mn.key)] = d.mean_ms;
    j[fmt::format("median_{}_ms", mn.key)] = d.median_ms;
    j[fmt::format("std_{}_ms", mn.key)] = d.std_ms;
    for (const auto& [p, v] : d.percentiles_ms) j[fmt::format("p{}_{}_ms", percentile_word(p), mn.key)] = v;
  }
  return j;
}

}  // namespace hyllm::bench
