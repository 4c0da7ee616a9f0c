// EngineCore's metrics: what a finished request adds to the histograms, and
// the periodic stats lines (vLLM's wording, which log scrapers match).

#include "engine/engine_core.h"
#include "util/log.h"

namespace hyllm {

void EngineCore::record_finished(const Request& req, Clock::time_point now) {
  std::lock_guard lock(stats_mutex_);
  int64_t generated = 0;
  int max_choice_tokens = 0;
  Clock::time_point last_token{};
  for (const auto& seq : req.seqs) {
    stats_.request_finished[static_cast<size_t>(seq->finish_reason)]++;
    generated += seq->num_output_tokens();
    max_choice_tokens = std::max(max_choice_tokens, seq->num_output_tokens());
    last_token = std::max(last_token, seq->last_token_time);
  }
  stats_.e2e_request_latency.observe(seconds(now - req.arrival_time));
  stats_.prompt_tokens_per_request.observe(req.num_prompt_tokens());
  stats_.generation_tokens_per_request.observe(static_cast<double>(generated));
  if (req.scheduled_once) {
    stats_.queue_time.observe(seconds(req.first_scheduled_time - req.arrival_time));
  }
  if (req.has_first_token) {
    const double decode = seconds(last_token - req.first_token_time);
    stats_.prefill_time.observe(seconds(req.first_token_time - req.first_scheduled_time));
    stats_.decode_time.observe(decode);
    stats_.inference_time.observe(seconds(last_token - req.first_scheduled_time));
    if (max_choice_tokens > 1) stats_.time_per_output_token.observe(decode / (max_choice_tokens - 1));
  }
}

EngineStats EngineCore::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void EngineCore::log_spec_decode_stats(const EngineStats& s, double elapsed, bool idle) {
  const auto level = idle ? spdlog::level::debug : spdlog::level::info;
  const uint64_t drafts = s.spec_num_drafts - last_log_spec_.spec_num_drafts;
  const uint64_t drafted = s.spec_num_draft_tokens - last_log_spec_.spec_num_draft_tokens;
  const uint64_t accepted = s.spec_num_accepted_tokens - last_log_spec_.spec_num_accepted_tokens;
  if (drafts > 0) {
    std::string per_pos;
    for (size_t j = 0; j < s.spec_accepted_per_pos.size(); ++j) {
      const uint64_t before = j < last_log_spec_.spec_accepted_per_pos.size() ? last_log_spec_.spec_accepted_per_pos[j] : 0;
      per_pos += fmt::format("{}{:.3f}", j ? ", " : "", static_cast<double>(s.spec_accepted_per_pos[j] - before) / drafts);
    }
    spdlog::log(level,
                "SpecDecoding metrics: Mean acceptance length: {:.2f}, Accepted throughput: {:.2f} tokens/s, Drafted "
                "throughput: {:.2f} tokens/s, Accepted: {} tokens, Drafted: {} tokens, Per-position acceptance rate: "
                "{}, Avg Draft acceptance rate: {:.1f}%",
                1.0 + static_cast<double>(accepted) / drafts, accepted / elapsed, drafted / elapsed, accepted, drafted,
                per_pos, drafted ? 100.0 * static_cast<double>(accepted) / drafted : 0.0);
  }
  last_log_spec_.spec_num_drafts = s.spec_num_drafts;
  last_log_spec_.spec_num_draft_tokens = s.spec_num_draft_tokens;
  last_log_spec_.spec_num_accepted_tokens = s.spec_num_accepted_tokens;
  last_log_spec_.spec_accepted_per_pos = s.spec_accepted_per_pos;
}

void EngineCore::log_stats_if_due() {
  if (config_.log_stats_interval_s <= 0) return;
  const Clock::time_point now = Clock::now();
  const double elapsed = seconds(now - last_log_time_);
  if (elapsed < config_.log_stats_interval_s) return;
  const EngineStats s = stats();
  const double prompt_tps = static_cast<double>(s.prompt_tokens - last_log_prompt_tokens_) / elapsed;
  const double gen_tps = static_cast<double>(s.generation_tokens - last_log_generation_tokens_) / elapsed;
  const bool idle = prompt_tps == 0 && gen_tps == 0 && s.num_requests_running == 0 && s.num_requests_waiting == 0;
  const auto level = idle ? spdlog::level::debug : spdlog::level::info;
  const double hit_rate = recent_queries_ > 0 ? 100.0 * static_cast<double>(recent_hits_) / recent_queries_ : 0.0;
  spdlog::log(level,
              "Engine 000: Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, "
              "Running: {} reqs, Waiting: {} reqs, GPU KV cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%",
              prompt_tps, gen_tps, s.num_requests_running, s.num_requests_waiting, s.kv_cache_usage * 100.0,
              hit_rate);
  log_spec_decode_stats(s, elapsed, idle);
  last_log_time_ = now;
  last_log_prompt_tokens_ = s.prompt_tokens;
  last_log_generation_tokens_ = s.generation_tokens;
}

}  // namespace hyllm
