#pragma once
// The printed table and the JSON result of a serving benchmark, laid out and
// keyed like `vllm bench serve` so existing scripts and dashboards read ours.

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/metrics.h"

namespace hyllm::bench {

struct ReportContext {
  std::optional<int> max_concurrency;
  double request_rate = std::numeric_limits<double>::infinity();
  double duration_s = 0.0;
  bool goodput = false;
  std::vector<std::string> percentile_metrics{"ttft", "tpot", "itl"};
};

std::string format_report(const BenchmarkMetrics& m, const ReportContext& ctx);

// Aggregates plus per-request arrays (input_lens, output_lens, ttfts, itls,
// latencies, start_times, queue_times, generated_texts, errors).
nlohmann::json result_json(const BenchmarkMetrics& m, const ReportContext& ctx,
                           const std::vector<RequestResult>& results);

// "99" for 99.0, "99.9" for 99.9, as vLLM names its percentile keys.
std::string percentile_word(double p);

}  // namespace hyllm::bench
