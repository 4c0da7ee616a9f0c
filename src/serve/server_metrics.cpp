#include "serve/server_metrics.h"

#include <algorithm>

namespace hyllm::serve {
namespace {

// vLLM's bucket boundaries (v1/metrics/loggers.py).
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                                    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "error";
}

ServerMetrics::ServerMetrics(std::string model_name, int64_t max_model_len)
    : model_name_(std::move(model_name)),
      ttft_(kTtftBuckets),
      inter_token_(kTokenLatencyBuckets),
      time_per_output_token_(kTokenLatencyBuckets),
      e2e_(kRequestLatencyBuckets),
      queue_(kRequestLatencyBuckets),
      prefill_(kRequestLatencyBuckets),
      decode_(kRequestLatencyBuckets),
      inference_(kRequestLatencyBuckets),
      prompt_tokens_hist_(buckets_1_2_5(static_cast<double>(max_model_len))),
      generation_tokens_hist_(buckets_1_2_5(static_cast<double>(max_model_len))),
      params_n_({1, 2, 5, 10, 20}),
      params_max_tokens_(buckets_1_2_5(static_cast<double>(max_model_len))) {}

void ServerMetrics::on_first_token(double ttft_seconds, int64_t prompt_tokens) {
  ttft_.observe(ttft_seconds);
  prompt_tokens_.fetch_add(static_cast<uint64_t>(prompt_tokens), std::memory_order_relaxed);
}

void ServerMetrics::on_tokens(int64_t count, std::optional<double> gap_seconds) {
  generation_tokens_.fetch_add(static_cast<uint64_t>(count), std::memory_order_relaxed);
  if (gap_seconds) inter_token_.observe(*gap_seconds);
}

void ServerMetrics::on_finished(const FinishedRequest& r) {
  finished_[static_cast<int>(r.reason)].fetch_add(1, std::memory_order_relaxed);
  e2e_.observe(r.e2e_seconds);
  prompt_tokens_hist_.observe(static_cast<double>(r.prompt_tokens));
  generation_tokens_hist_.observe(static_cast<double>(r.generation_tokens));
  params_n_.observe(r.n);
  params_max_tokens_.observe(static_cast<double>(r.max_tokens));
  if (r.queue_seconds) queue_.observe(*r.queue_seconds);
  if (r.prefill_seconds) prefill_.observe(*r.prefill_seconds);
  if (r.decode_seconds) decode_.observe(*r.decode_seconds);
  if (r.prefill_seconds && r.decode_seconds) inference_.observe(*r.prefill_seconds + *r.decode_seconds);
  // TPOT excludes the first token; with n > 1 choices it uses the mean length.
  int64_t per_choice = r.generation_tokens / std::max(1, r.n);
  if (r.ttft_seconds && per_choice > 1) {
    time_per_output_token_.observe((r.e2e_seconds - *r.ttft_seconds) / static_cast<double>(per_choice - 1));
  }
}

std::string ServerMetrics::render(const EngineGauges& engine) const {
  PrometheusWriter w({{"engine", "0"}, {"model_name", model_name_}});
  w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
          static_cast<double>(engine.num_running));
  w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
          static_cast<double>(engine.num_waiting));
  w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", engine.kv_cache_usage);
  w.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
            static_cast<double>(engine.num_preemptions));
  w.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
            static_cast<double>(engine.prefix_cache_queries));
  w.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
            static_cast<double>(engine.prefix_cache_hits));
  w.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", static_cast<double>(prompt_tokens_total()));
  w.counter("vllm:generation_tokens", "Number of generation tokens processed.",
            static_cast<double>(generation_tokens_total()));
  std::vector<std::pair<std::string, double>> finished;
  for (auto r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kAbort, FinishReason::kError}) {
    finished.emplace_back(finish_reason_name(r),
                          static_cast<double>(finished_[static_cast<int>(r)].load(std::memory_order_relaxed)));
  }
  w.labelled_counter("vllm:request_success", "Count of successfully processed requests.", "finished_reason",
                     finished);
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
  w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", inter_token_);
  w.histogram("vllm:request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.", time_per_output_token_);
  w.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2e_);
  w.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", queue_);
  w.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
              inference_);
  w.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
              prefill_);
  w.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", decode_);
  w.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", prompt_tokens_hist_);
  w.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", generation_tokens_hist_);
  w.histogram("vllm:request_params_n", "Histogram of the n request parameter.", params_n_);
  w.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
              params_max_tokens_);
  return w.text();
}

}  // namespace hyllm::serve
