#pragma once
// The metrics /metrics exposes, with vLLM's names and labels (model_name,
// engine) so that existing Grafana dashboards work unchanged. Request-level
// histograms are fed by the HTTP handlers as tokens stream out; engine gauges
// (running, waiting, cache usage, preemptions, prefix cache) come from the
// engine's stats snapshot at scrape time.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "serve/prometheus.h"

namespace hyllm::serve {

struct EngineGauges {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  double kv_cache_usage = 0;  // 0..1
  uint64_t num_preemptions = 0;
  uint64_t prefix_cache_queries = 0;  // tokens looked up
  uint64_t prefix_cache_hits = 0;     // tokens found
};

enum class FinishReason { kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason r);

struct FinishedRequest {
  FinishReason reason = FinishReason::kStop;
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;  // over all choices
  int n = 1;
  int64_t max_tokens = 0;
  double e2e_seconds = 0;
  std::optional<double> ttft_seconds;       // unset when no token came out
  std::optional<double> queue_seconds;      // arrival to first scheduled, when the engine reports it
  std::optional<double> prefill_seconds;    // first scheduled to first token
  std::optional<double> decode_seconds;     // first token to last token
};

class ServerMetrics {
 public:
  ServerMetrics(std::string model_name, int64_t max_model_len);

  // A request's first token arrived (its prompt is counted then, as in vLLM).
  void on_first_token(double ttft_seconds, int64_t prompt_tokens);
  // A later step gave a request new tokens, gap seconds after its previous one.
  void on_tokens(int64_t count, std::optional<double> gap_seconds);
  void on_finished(const FinishedRequest& r);

  std::string render(const EngineGauges& engine) const;

  uint64_t prompt_tokens_total() const { return prompt_tokens_.load(std::memory_order_relaxed); }
  uint64_t generation_tokens_total() const { return generation_tokens_.load(std::memory_order_relaxed); }

 private:
  std::string model_name_;
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> generation_tokens_{0};
  std::atomic<uint64_t> finished_[4] = {};
  Histogram ttft_;
  Histogram inter_token_;
  Histogram time_per_output_token_;
  Histogram e2e_;
  Histogram queue_;
  Histogram prefill_;
  Histogram decode_;
  Histogram inference_;
  Histogram prompt_tokens_hist_;
  Histogram generation_tokens_hist_;
  Histogram params_n_;
  Histogram params_max_tokens_;
};

}  // namespace hyllm::serve
