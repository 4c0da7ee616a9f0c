#pragma once
// The engine core: one step = schedule -> execute (the executor samples) ->
// update (append tokens, check stops, free finished sequences) -> outputs.
// Single-threaded: EngineClient runs it on the engine thread; tests drive it
// directly. Only validate() and stats() may be called from other threads.

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_client.h"
#include "engine/executor.h"
#include "engine/kv/cache_plan.h"
#include "engine/request.h"
#include "engine/scheduler.h"

namespace hyllm {

class EngineCore {
 public:
  // Sizes the cache from the executor's budget (or kv_cache_memory_bytes),
  // logs the plan and allocates it through the executor.
  EngineCore(ModelExecutor& executor, EngineConfig config);

  const EngineConfig& config() const { return config_; }
  const CachePlan& cache_plan() const { return plan_; }
  int vocab_size() const { return vocab_size_; }

  // Throws Error(kInvalidArgument) when the request can never run.
  void validate(const EngineRequest& request) const;
  // Queues a request validate() accepted; its id must not be live.
  void add_request(EngineRequest request);
  // Finishes the request with kAbort now, freeing its cache; the final output
  // comes with the next step(). Unknown ids are ignored.
  void abort_request(const std::string& request_id);
  // Finishes every live request with `reason` (shutdown, engine failure).
  void finish_all(FinishReason reason, const std::string& message = {});
  // Forgets every cached prefix; see Scheduler::reset_prefix_cache.
  bool reset_prefix_cache(bool reset_running_requests);

  // One engine step; the outputs of every request with news.
  std::vector<RequestOutput> step();

  bool has_unfinished_requests() const { return !requests_.empty(); }
  size_t num_live_requests() const { return requests_.size(); }
  const Scheduler& scheduler() const { return *scheduler_; }

  EngineStats stats() const;
  // The periodic "Avg prompt throughput ..." line when log_stats_interval_s has passed.
  void log_stats_if_due();

 private:
  // A constrained choice's grammar advanced over its tokens of a step, ahead
  // of the serial loop that appends them: the grammars of different choices
  // are independent, so they run on the worker pool. Tokens past `accepted`
  // go through append_token's own check (which refuses them again, or finds
  // the choice finished first).
  struct ConstraintAdvance {
    size_t accepted = 0;
    bool forced_ready = false;  // forced / forced_error hold jump-forward after every token
    std::vector<int32_t> forced;
    std::string forced_error;
  };
  // Per sampled chunk, in chunk order; empty when too few choices are constrained to gain from the pool.
  std::vector<ConstraintAdvance> advance_constraints(const SchedulerOutput& sched, const StepOutput& result);
  static constexpr size_t kParallelConstraints = 4;
  // forced: the token came from the constraint's jump-forward, or the constraint took it already.
  void append_token(Sequence& seq, const SampledToken& sampled, Clock::time_point now, bool forced = false);
  // Appends the tokens the choice's constraint forces next (no forward pass
  // needed to choose them; the next step computes them as one chunk), from
  // `ready` when advance_constraints computed them.
  void jump_forward(Sequence& seq, Clock::time_point now, const ConstraintAdvance* ready = nullptr);
  // Checks the stop conditions after a token was appended; finishes the choice if one holds.
  void check_stop(Sequence& seq, int32_t token);
  void mark_news(Request& req);
  // Speculative decoding, after a step: shortens each verify chunk to the
  // tokens it accepted (for commit) and counts drafts; an error message when
  // the executor's answer is inconsistent.
  std::string apply_acceptance(SchedulerOutput& sched, const StepOutput& result);
  // Prompt logprobs: moves each scored chunk's entries into its request.
  void keep_prompt_logprobs(const SchedulerOutput& sched, StepOutput& result);
  // Keeps a choice's proposed drafts for the next step, as many as it may still use.
  void keep_drafts(Sequence& seq, std::vector<int32_t> drafts);
  // status 400: the request itself cannot be served (its masks leave no token).
  void fail_request(Request& req, const std::string& message, int status = 500);
  std::vector<RequestOutput> collect_outputs(Clock::time_point now);
  void record_finished(const Request& req, Clock::time_point now);

  EngineConfig config_;
  ModelExecutor& executor_;
  CachePlan plan_;
  int vocab_size_ = 0;
  std::unique_ptr<Scheduler> scheduler_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::vector<Request*> with_news_;
  std::vector<int64_t> unannounced_finished_ids_;
  std::mt19937_64 seed_rng_;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  // For the periodic log.
  Clock::time_point last_log_time_;
  uint64_t last_log_prompt_tokens_ = 0;
  uint64_t last_log_generation_tokens_ = 0;
  EngineStats last_log_spec_;  // the speculative-decoding counters at the last log line
  // vLLM's "SpecDecoding metrics: Mean acceptance length ..." line over the interval, when drafts were verified.
  void log_spec_decode_stats(const EngineStats& s, double elapsed, bool idle);
  // The prefix cache hit rate of the log line: over the most recent
  // lookups (requests), as vLLM reports it.
  void observe_prefix_lookups(const std::vector<PrefixLookup>& lookups);
  std::deque<PrefixLookup> recent_lookups_;
  int64_t recent_queries_ = 0, recent_hits_ = 0;
};

}  // namespace hyllm
