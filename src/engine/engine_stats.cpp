#include "engine/engine_stats.h"

#include <algorithm>

namespace hyllm {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "";
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  // Prometheus buckets are inclusive of their upper bound ("le").
  auto it = std::lower_bound(bounds.begin(), bounds.end(), value);
  counts[static_cast<size_t>(it - bounds.begin())]++;
  sum += value;
  count++;
}

std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
          1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> inter_token_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
          0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> request_latency_buckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> iteration_tokens_buckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

std::vector<double> params_n_buckets() { return {1, 2, 5, 10, 20}; }

std::vector<double> buckets_1_2_5(int64_t max_value) {
  std::vector<double> out;
  for (int64_t exponent = 1;; exponent *= 10) {
    for (int64_t mantissa : {1, 2, 5}) {
      int64_t v = mantissa * exponent;
      if (v > max_value) return out;
      out.push_back(static_cast<double>(v));
    }
  }
}

EngineStats::EngineStats(int max_model_len)
    : prompt_tokens_per_request(buckets_1_2_5(max_model_len)),
      generation_tokens_per_request(buckets_1_2_5(max_model_len)),
      params_max_tokens(buckets_1_2_5(max_model_len)) {}

}  // namespace hyllm
