#include "serve/metrics_text.h"

#include "serve/prometheus.h"

namespace hyllm::serve {

std::string render_metrics(const EngineStats& s, std::string_view model_name) {
  PrometheusWriter w(Labels{{"engine", "0"}, {"model_name", std::string(model_name)}});
  w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
          s.num_requests_running);
  w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.num_requests_waiting);
  w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.kv_cache_usage);
  w.gauge("hyllm:state_slot_usage_perc", "GDN state-slot usage. 1 means 100 percent usage.", s.state_slot_usage);
  w.gauge("hyllm:recorded_graphs", "Decode-step device graphs kept for replay (each holds host and device memory).",
          static_cast<double>(s.recorded_graphs));
  w.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
            static_cast<double>(s.num_preemptions));
  w.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", static_cast<double>(s.prompt_tokens));
  w.counter("vllm:generation_tokens", "Number of generation tokens processed.",
            static_cast<double>(s.generation_tokens));
  w.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
            static_cast<double>(s.prefix_cache_queries));
  w.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
            static_cast<double>(s.prefix_cache_hits));
  if (!s.spec_accepted_per_pos.empty()) {  // speculative decoding is on
    w.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
              static_cast<double>(s.spec_num_drafts));
    w.counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
              static_cast<double>(s.spec_num_draft_tokens));
    w.counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
              static_cast<double>(s.spec_num_accepted_tokens));
    std::vector<std::pair<std::string, double>> per_pos;
    for (size_t j = 0; j < s.spec_accepted_per_pos.size(); ++j)
      per_pos.emplace_back(std::to_string(j), static_cast<double>(s.spec_accepted_per_pos[j]));
    w.labelled_counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                       "position", per_pos);
  }
  std::vector<std::pair<std::string, double>> finished;
  for (int r = 0; r < kNumFinishReasons; ++r) {
    finished.emplace_back(std::string(finish_reason_name(static_cast<FinishReason>(r))),
                          static_cast<double>(s.request_finished[r]));
  }
  w.labelled_counter("vllm:request_success", "Count of successfully processed requests.", "finished_reason",
                     finished);
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              s.time_to_first_token);
  w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              s.inter_token_latency);
  w.histogram("vllm:request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.", s.time_per_output_token);
  w.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              s.e2e_request_latency);
  w.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
              s.queue_time);
  w.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
              s.inference_time);
  w.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
              s.prefill_time);
  w.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
              s.decode_time);
  w.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens_per_request);
  w.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
              s.generation_tokens_per_request);
  w.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", s.iteration_tokens);
  w.histogram("vllm:request_params_n", "Histogram of the n request parameter.", s.params_n);
  w.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
              s.params_max_tokens);
  return w.text();
}

}  // namespace hyllm::serve
