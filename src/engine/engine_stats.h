#pragma once
// A snapshot of the engine's metrics, copied out under a lock by
// EngineClient::stats(). The server renders it as Prometheus text with vLLM's
// names (given next to each field); the bucket boundaries are vLLM's, so
// dashboards built for vLLM read hyllm unchanged.

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace hyllm {

enum class FinishReason : int8_t { kNone = -1, kStop = 0, kLength = 1, kAbort = 2, kError = 3 };
inline constexpr int kNumFinishReasons = 4;

// "stop", "length", "abort", "error" (vLLM's finished_reason label values), "" for kNone.
std::string_view finish_reason_name(FinishReason reason);

// A Prometheus histogram: counts[i] observations fell in (bounds[i-1], bounds[i]],
// the last entry counts those above every bound (the +Inf bucket). Counts are
// per bucket, not cumulative: the renderer sums them.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1 entries
  double sum = 0.0;
  uint64_t count = 0;

  Histogram() = default;
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
};

// vLLM's bucket boundaries.
std::vector<double> ttft_buckets();            // time_to_first_token_seconds
std::vector<double> inter_token_buckets();     // inter_token_latency_seconds, request_time_per_output_token_seconds
std::vector<double> request_latency_buckets(); // e2e, queue, inference, prefill, decode seconds
std::vector<double> iteration_tokens_buckets(); // iteration_tokens_total
std::vector<double> params_n_buckets();        // request_params_n
// 1, 2, 5, 10, 20, 50, ... up to max_value (request_prompt_tokens,
// request_generation_tokens, request_params_max_tokens).
std::vector<double> buckets_1_2_5(int64_t max_value);

struct EngineStats {
  // Gauges.
  // Counted in sequences: vLLM runs each of n choices as its own request.
  int num_requests_running = 0;     // vllm:num_requests_running
  int num_requests_waiting = 0;     // vllm:num_requests_waiting
  double kv_cache_usage = 0.0;      // vllm:kv_cache_usage_perc, 0..1 (blocks in use / blocks)
  double state_slot_usage = 0.0;    // GDN state slots in use / slots (hyllm only)
  int64_t recorded_graphs = 0;      // decode-step device graphs kept for replay (hyllm only)

  // Counters.
  uint64_t num_preemptions = 0;     // vllm:num_preemptions_total
  uint64_t prompt_tokens = 0;       // vllm:prompt_tokens_total (tokens of admitted prompts)
  uint64_t generation_tokens = 0;   // vllm:generation_tokens_total
  // Prompt tokens looked up in the prefix cache at each request's first
  // admission, and those found (vllm:prefix_cache_queries_total, _hits_total).
  uint64_t prefix_cache_queries = 0;
  uint64_t prefix_cache_hits = 0;
  // Speculative decoding: verify steps of a sequence with drafts, the drafts
  // they checked, the drafts accepted, and accepted drafts by position
  // (vllm:spec_decode_num_drafts / _num_draft_tokens / _num_accepted_tokens
  // and _num_accepted_tokens_per_pos{position}).
  uint64_t spec_num_drafts = 0;
  uint64_t spec_num_draft_tokens = 0;
  uint64_t spec_num_accepted_tokens = 0;
  std::vector<uint64_t> spec_accepted_per_pos;  // num_speculative_tokens entries
  // vllm:request_success_total{finished_reason=...}, indexed by FinishReason,
  // counted per choice (vLLM's n children are requests of their own).
  std::array<uint64_t, kNumFinishReasons> request_finished{};
  uint64_t num_steps = 0;           // engine steps run (hyllm only)

  // Histograms (per finished request unless noted).
  Histogram time_to_first_token{ttft_buckets()};             // vllm:time_to_first_token_seconds
  Histogram inter_token_latency{inter_token_buckets()};      // vllm:inter_token_latency_seconds (per token)
  Histogram time_per_output_token{inter_token_buckets()};    // vllm:request_time_per_output_token_seconds
  Histogram e2e_request_latency{request_latency_buckets()};  // vllm:e2e_request_latency_seconds
  Histogram queue_time{request_latency_buckets()};           // vllm:request_queue_time_seconds
  Histogram inference_time{request_latency_buckets()};       // vllm:request_inference_time_seconds
  Histogram prefill_time{request_latency_buckets()};         // vllm:request_prefill_time_seconds
  Histogram decode_time{request_latency_buckets()};          // vllm:request_decode_time_seconds
  Histogram prompt_tokens_per_request;                       // vllm:request_prompt_tokens
  Histogram generation_tokens_per_request;                   // vllm:request_generation_tokens
  Histogram iteration_tokens{iteration_tokens_buckets()};    // vllm:iteration_tokens_total (per step)
  Histogram params_n{params_n_buckets()};                    // vllm:request_params_n
  Histogram params_max_tokens;                               // vllm:request_params_max_tokens

  // Cache geometry, fixed at startup.
  int block_size = 0;
  int num_kv_blocks = 0;
  int num_state_slots = 0;
  int64_t kv_capacity_tokens = 0;

  // Sized by max_model_len (the token-count histograms' last bound).
  explicit EngineStats(int max_model_len = 4096);
};

}  // namespace hyllm
