#pragma once
// Per-request measurements and the aggregate metrics of a serving benchmark,
// computed exactly as `vllm bench serve` computes them (BENCHMARKING.md 1):
//  - TTFT: send to the first SSE message carrying a choices entry;
//  - ITL: gaps between consecutive choice-bearing messages (per chunk);
//  - E2EL: send to the last choice-bearing message;
//  - TPOT: (E2EL - TTFT) / (output_tokens - 1), requests with > 1 token only;
//  - output and prompt token counts come from the server's usage.
// Times are seconds on one monotonic clock shared by all requests.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hyllm::bench {

struct RequestResult {
  bool success = false;
  int prompt_len = 0;       // usage.prompt_tokens when the server sent usage
  int output_tokens = 0;    // usage.completion_tokens; 0 when absent
  int cached_tokens = 0;    // usage.prompt_tokens_details.cached_tokens; 0 when absent
  double ttft = 0.0;
  std::vector<double> itl;
  double latency = 0.0;     // E2EL
  double start_time = 0.0;  // when the request was sent
  double client_queue_time = 0.0;  // waiting for a concurrency slot
  std::string generated_text;
  std::string error;
};

// Service-level objectives for goodput, in milliseconds: keys ttft, tpot, e2el.
using GoodputSlo = std::map<std::string, double>;

struct Distribution {
  double mean_ms = 0, median_ms = 0, std_ms = 0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};

struct BenchmarkMetrics {
  int completed = 0;
  int failed = 0;
  long long total_input = 0;
  long long total_output = 0;
  long long total_cached = 0;    // prompt tokens the server served from its prefix cache
  double request_throughput = 0;
  double request_goodput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  Distribution ttft, tpot, itl, e2el;
  double max_output_tokens_per_s = 0;
  int max_concurrent_requests = 0;
  std::vector<int> output_lens;  // per request, 0 for failures
};

// Output tokens of a request without usage are counted as its number of
// choice-bearing chunks (a client without a tokenizer cannot do better).
BenchmarkMetrics calculate_metrics(const std::vector<RequestResult>& results, double duration_s,
                                   const std::vector<double>& percentiles, const GoodputSlo& goodput);

// "ttft:500", "tpot:50" pairs; throws hyllm::Error on a bad key or value.
GoodputSlo parse_goodput(const std::vector<std::string>& pairs);

}  // namespace hyllm::bench
