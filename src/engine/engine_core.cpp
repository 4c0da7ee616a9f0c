#include "engine/engine_core.h"

#include <algorithm>

#include "util/log.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace hyllm {

EngineCore::EngineCore(ModelExecutor& executor, EngineConfig config)
    : config_(std::move(config)), executor_(executor), seed_rng_(config_.seed), stats_(config_.max_model_len) {
  config_.validate();
  vocab_size_ = executor_.vocab_size();
  HYLLM_CHECK(vocab_size_ > 0, "executor reports vocab size {}", vocab_size_);
  for (int32_t t : config_.eos_token_ids) {
    if (t < 0 || t >= vocab_size_) fail(ErrorCode::kInvalidArgument, "EOS token id {} is out of vocabulary", t);
  }
  const CacheLayout layout = executor_.cache_layout();
  CachePlanInput in;
  const size_t executor_budget = executor_.cache_memory_budget();  // may profile a step
  in.budget_bytes = config_.kv_cache_memory_bytes.value_or(executor_budget);
  in.kv_bytes_per_token = layout.kv_bytes_per_token;
  in.bytes_per_state_slot = layout.bytes_per_state_slot;
  in.block_size = config_.block_size;
  in.max_num_seqs = config_.max_num_seqs;
  in.max_model_len = config_.max_model_len;
  in.num_blocks_override = config_.num_gpu_blocks_override;
  in.enable_prefix_caching = config_.enable_prefix_caching;
  in.reserved_blocks = layout.reserved_blocks;
  in.reserved_state_slots = layout.reserved_state_slots;
  plan_ = plan_cache(in);
  log_cache_plan(plan_, in);
  // The executor's reserved ids follow the pools, which the scheduler owns.
  executor_.allocate_cache({plan_.block_size, plan_.num_blocks + plan_.reserved_blocks,
                            plan_.num_state_slots + plan_.reserved_state_slots});
  scheduler_ = std::make_unique<Scheduler>(config_, plan_.num_blocks, plan_.num_state_slots);
  stats_.block_size = plan_.block_size;
  stats_.num_kv_blocks = plan_.num_blocks;
  stats_.num_state_slots = plan_.num_state_slots;
  stats_.kv_capacity_tokens = plan_.kv_capacity_tokens;
  stats_.spec_accepted_per_pos.assign(static_cast<size_t>(config_.num_speculative_tokens), 0);
  last_log_time_ = Clock::now();
}

void EngineCore::add_request(EngineRequest request) {
  HYLLM_CHECK(!requests_.count(request.request_id), "request id {} is live", request.request_id);
  auto req = std::make_unique<Request>();
  req->id = std::move(request.request_id);
  req->sampling = std::move(request.sampling);
  req->stop_hook = std::move(request.stop_hook);
  req->constraints = std::move(request.constraints);
  req->arrival_time = request.arrival_time;
  req->forked = req->sampling.n == 1;
  req->base_seed = req->sampling.seed ? *req->sampling.seed : seed_rng_();
  req->min_tokens_banned = req->sampling.stop_token_ids;
  if (!req->sampling.ignore_eos) {
    req->min_tokens_banned.insert(req->min_tokens_banned.end(), config_.eos_token_ids.begin(),
                                  config_.eos_token_ids.end());
  }
  std::sort(req->min_tokens_banned.begin(), req->min_tokens_banned.end());
  req->min_tokens_banned.erase(std::unique(req->min_tokens_banned.begin(), req->min_tokens_banned.end()),
                               req->min_tokens_banned.end());
  auto seq = std::make_unique<Sequence>();
  seq->request = req.get();
  seq->index = 0;
  seq->tokens = std::move(request.prompt_token_ids);
  seq->num_prompt_tokens = seq->num_tokens();
  seq->seed = req->base_seed;
  if (req->sampling.prompt_logprobs) req->prompt_logprobs.resize(static_cast<size_t>(seq->num_prompt_tokens - 1));
  if (!request.cache_salt.empty()) seq->block_hashes.root = salted_root_hash(request.cache_salt);
  req->seqs.push_back(std::move(seq));
  scheduler_->add_request(*req);
  {
    std::lock_guard lock(stats_mutex_);
    stats_.params_n.observe(req->sampling.n);
    stats_.params_max_tokens.observe(req->sampling.max_tokens);
  }
  requests_.emplace(req->id, std::move(req));
}

void EngineCore::mark_news(Request& req) {
  if (!req.has_news) {
    req.has_news = true;
    with_news_.push_back(&req);
  }
}

void EngineCore::abort_request(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end() || it->second->finished()) return;
  scheduler_->finish_request(*it->second, FinishReason::kAbort);
  mark_news(*it->second);
}

void EngineCore::fail_request(Request& req, const std::string& message, int status) {
  if (req.finished()) return;
  log::error("request {} failed: {}", req.id, message);
  req.error_message = message;
  req.error_status = status;
  scheduler_->finish_request(req, FinishReason::kError);
  mark_news(req);
}

bool EngineCore::reset_prefix_cache(bool reset_running_requests) {
  const bool reset = scheduler_->reset_prefix_cache(reset_running_requests);
  if (reset) {
    log::info("Prefix cache reset");
  } else {
    log::warn("Prefix cache not reset: {} sequences are running (reset_running_requests preempts them)",
              scheduler_->num_running_seqs());
  }
  return reset;
}

void EngineCore::observe_prefix_lookups(const std::vector<PrefixLookup>& lookups) {
  constexpr size_t kRecentLookups = 1000;
  for (const PrefixLookup& l : lookups) {
    recent_lookups_.push_back(l);
    recent_queries_ += l.num_prompt_tokens;
    recent_hits_ += l.num_cached_tokens;
    if (recent_lookups_.size() > kRecentLookups) {
      recent_queries_ -= recent_lookups_.front().num_prompt_tokens;
      recent_hits_ -= recent_lookups_.front().num_cached_tokens;
      recent_lookups_.pop_front();
    }
  }
}

void EngineCore::finish_all(FinishReason reason, const std::string& message) {
  for (auto& [id, req] : requests_) {
    if (req->finished()) continue;
    if (!message.empty()) req->error_message = message;
    scheduler_->finish_request(*req, reason);
    mark_news(*req);
  }
}

std::vector<RequestOutput> EngineCore::step() {
  SchedulerOutput sched = scheduler_->schedule();
  unannounced_finished_ids_.insert(unannounced_finished_ids_.end(), sched.finished_seq_ids.begin(),
                                   sched.finished_seq_ids.end());
  const Clock::time_point start = Clock::now();
  observe_prefix_lookups(sched.prefix_lookups);
  if (!sched.prefix_lookups.empty()) {
    std::lock_guard lock(stats_mutex_);
    for (const PrefixLookup& l : sched.prefix_lookups) {
      stats_.prefix_cache_queries += static_cast<uint64_t>(l.num_prompt_tokens);
      stats_.prefix_cache_hits += static_cast<uint64_t>(l.num_cached_tokens);
    }
  }
  for (const ScheduledChunk& c : sched.chunks) {
    Request& req = *c.seq->request;
    if (!req.scheduled_once) {
      req.scheduled_once = true;
      req.first_scheduled_time = start;
    }
  }
  if (!sched.empty()) {
    // The drafts sit after the real tokens for the step, so that a verify
    // chunk's tokens (and the context of each of its rows) are contiguous.
    for (const ScheduledChunk& c : sched.chunks) {
      if (c.num_drafts > 0) c.seq->tokens.insert(c.seq->tokens.end(), c.seq->draft_tokens.begin(), c.seq->draft_tokens.end());
    }
    StepInput input;
    input.seqs.reserve(sched.chunks.size());
    size_t num_samples = 0, num_scored_chunks = 0;
    for (const ScheduledChunk& c : sched.chunks) {
      const Sequence& seq = *c.seq;
      const int num_real = seq.num_tokens() - c.num_drafts;
      SeqWork w;
      w.seq_id = seq.seq_id;
      w.token_ids = std::span<const int32_t>(seq.tokens).subspan(static_cast<size_t>(c.start_pos),
                                                                 static_cast<size_t>(c.num_tokens));
      w.num_drafts = c.num_drafts;
      const int end = c.start_pos + c.num_tokens;
      if (!c.sample && end < num_real) w.next_token = seq.tokens[static_cast<size_t>(end)];
      w.start_pos = c.start_pos;
      w.block_table = seq.block_table;
      w.state_slot = seq.state_slot;
      w.save_pos = c.save_pos;
      w.save_slot = c.save_slot;
      w.sample = c.sample;
      if (c.num_scored > 0) {
        w.score_ids = std::span<const int32_t>(seq.tokens).subspan(static_cast<size_t>(c.start_pos) + 1,
                                                                   static_cast<size_t>(c.num_scored));
        w.num_prompt_logprobs = *seq.request->sampling.prompt_logprobs;
        num_scored_chunks++;
      }
      if (c.sample) {
        const Request& req = *seq.request;
        const auto prompt_len = static_cast<size_t>(seq.num_prompt_tokens);
        w.sampling = &req.sampling;
        w.prompt_ids = std::span<const int32_t>(seq.tokens).first(prompt_len);
        w.output_ids = std::span<const int32_t>(seq.tokens).subspan(prompt_len, num_real - prompt_len);
        const int num_output = num_real - seq.num_prompt_tokens;  // (the drafts are not outputs yet)
        if (num_output < req.sampling.min_tokens) w.banned_token_ids = req.min_tokens_banned;
        w.seed = seq.seed;
        w.sample_index = static_cast<uint64_t>(num_output);
        w.constraint = req.constraint(seq.index);
        // Constrained choices do not speculate: their masks depend on the tokens accepted before.
        if (w.constraint == nullptr) w.propose_drafts = config_.num_speculative_tokens;
        num_samples++;
      }
      input.seqs.push_back(w);
    }
    input.kv_block_copies = std::move(sched.kv_block_copies);
    input.state_slot_copies = std::move(sched.state_slot_copies);
    input.finished_seq_ids = std::move(unannounced_finished_ids_);
    unannounced_finished_ids_.clear();

    StepOutput result;
    std::string failure;
    try {
      result = executor_.execute(input);
      if (result.sampled.size() != num_samples) {
        failure = fmt::format("executor returned {} samples for {} sampled sequences", result.sampled.size(),
                              num_samples);
      } else if (result.scored.size() != num_scored_chunks) {
        failure = fmt::format("executor scored {} chunks of {}", result.scored.size(), num_scored_chunks);
      } else {
        size_t k = 0;
        for (const ScheduledChunk& c : sched.chunks) {
          if (c.num_scored > 0 && result.scored[k++].size() != static_cast<size_t>(c.num_scored))
            failure = fmt::format("executor scored {} positions of {}", result.scored[k - 1].size(), c.num_scored);
        }
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
    for (const ScheduledChunk& c : sched.chunks) {
      if (c.num_drafts > 0) c.seq->tokens.resize(c.seq->tokens.size() - static_cast<size_t>(c.num_drafts));
    }
    const bool speculative = !result.accepted.empty();
    if (failure.empty() && speculative &&
        (result.accepted.size() != num_samples || result.drafts.size() != num_samples)) {
      failure = fmt::format("executor returned {} accepted and {} draft lists for {} sampled sequences",
                            result.accepted.size(), result.drafts.size(), num_samples);
    }
    if (failure.empty()) failure = apply_acceptance(sched, result);
    if (!failure.empty()) {
      // The step's sequences may hold partial cache writes: end their requests,
      // and forget the snapshots whose copies the step may not have made.
      scheduler_->discard(sched);
      for (const ScheduledChunk& c : sched.chunks) fail_request(*c.seq->request, "model execution failed: " + failure);
      for (Sequence* s : sched.copied_into) fail_request(*s->request, "model execution failed: " + failure);
    } else {
      // Accepted drafts join the tokens for commit() (which caches the
      // blocks they complete), then are appended one by one like any token.
      size_t k = 0;
      for (const ScheduledChunk& c : sched.chunks) {
        if (!c.sample) continue;
        if (speculative) {
          for (const SampledToken& t : result.accepted[k]) c.seq->tokens.push_back(t.token);
        }
        ++k;
      }
      scheduler_->commit(sched);
      keep_prompt_logprobs(sched, result);
      const std::vector<ConstraintAdvance> advanced = advance_constraints(sched, result);
      const Clock::time_point now = Clock::now();
      k = 0;
      for (const ScheduledChunk& c : sched.chunks) {
        if (!c.sample) continue;
        const size_t i = k++;
        Sequence& seq = *c.seq;
        const ConstraintAdvance* adv = advanced.empty() ? nullptr : &advanced[i];
        std::vector<SampledToken> emitted;
        if (speculative) {
          seq.tokens.resize(seq.tokens.size() - result.accepted[i].size());
          emitted = std::move(result.accepted[i]);
        }
        emitted.push_back(std::move(result.sampled[i]));
        for (size_t j = 0; j < emitted.size(); ++j) {
          const SampledToken& sampled = emitted[j];
          // A request that failed earlier in this loop (its hook threw) has finished choices.
          if (seq.finished()) break;
          if (sampled.token < 0) {
            // The request's own mask left nothing to sample; the batch goes on.
            fail_request(*seq.request,
                         "no token may be sampled: the request's structured output, allowed_token_ids, bad_words "
                         "or min_tokens leave none (or the model's logits are not finite)",
                         400);
            break;
          }
          if (sampled.token >= vocab_size_) {
            fail_request(*seq.request, fmt::format("sampled token id {} is out of vocabulary", sampled.token));
            break;
          }
          append_token(seq, sampled, now, /*forced=*/adv != nullptr && j < adv->accepted);
        }
        if (seq.finished()) continue;
        jump_forward(seq, now, adv != nullptr && adv->forced_ready ? adv : nullptr);
        if (speculative && !seq.finished()) keep_drafts(seq, std::move(result.drafts[i]));
      }
    }
  }
  const Clock::time_point end = Clock::now();
  {
    std::lock_guard lock(stats_mutex_);
    stats_.num_steps++;
    stats_.num_preemptions = scheduler_->num_preemptions();
    stats_.recorded_graphs = executor_.recorded_graphs();
    if (sched.num_scheduled_tokens > 0) stats_.iteration_tokens.observe(sched.num_scheduled_tokens);
  }
  return collect_outputs(end);
}

void EngineCore::keep_prompt_logprobs(const SchedulerOutput& sched, StepOutput& result) {
  size_t k = 0;
  for (const ScheduledChunk& c : sched.chunks) {
    if (c.num_scored == 0) continue;
    std::vector<TokenLogprob>& scored = result.scored[k++];
    std::vector<TokenLogprob>& into = c.seq->request->prompt_logprobs;
    std::move(scored.begin(), scored.end(), into.begin() + c.start_pos);
  }
}

std::string EngineCore::apply_acceptance(SchedulerOutput& sched, const StepOutput& result) {
  size_t k = 0;
  uint64_t drafts = 0, draft_tokens = 0, accepted_tokens = 0;
  std::vector<uint64_t> per_pos(static_cast<size_t>(config_.num_speculative_tokens), 0);
  for (ScheduledChunk& c : sched.chunks) {
    if (!c.sample) continue;
    const size_t accepted = result.accepted.empty() ? 0 : result.accepted[k].size();
    ++k;
    if (accepted > static_cast<size_t>(c.num_drafts))
      return fmt::format("executor accepted {} of {} drafts", accepted, c.num_drafts);
    if (c.num_drafts == 0) continue;
    c.num_tokens -= c.num_drafts - static_cast<int>(accepted);  // the rejected drafts were never computed
    drafts += 1;
    draft_tokens += static_cast<uint64_t>(c.num_drafts);
    accepted_tokens += accepted;
    for (size_t j = 0; j < accepted && j < per_pos.size(); ++j) per_pos[j]++;
  }
  std::lock_guard lock(stats_mutex_);
  stats_.spec_num_drafts += drafts;
  stats_.spec_num_draft_tokens += draft_tokens;
  stats_.spec_num_accepted_tokens += accepted_tokens;
  for (size_t j = 0; j < per_pos.size(); ++j) stats_.spec_accepted_per_pos[j] += per_pos[j];
  return {};
}

void EngineCore::keep_drafts(Sequence& seq, std::vector<int32_t> drafts) {
  // A step emits up to 1 + drafts tokens: no more drafts than the choice may still generate, less one.
  const SamplingParams& s = seq.request->sampling;
  const int room = std::min(s.max_tokens - seq.num_output_tokens(), config_.max_model_len - seq.num_tokens()) - 1;
  if (room <= 0) return;
  if (static_cast<int>(drafts.size()) > room) drafts.resize(static_cast<size_t>(room));
  for (int32_t t : drafts) {
    if (t < 0 || t >= vocab_size_) return;  // a bad draft is dropped; it could only be rejected
  }
  seq.draft_tokens = std::move(drafts);
}

std::vector<EngineCore::ConstraintAdvance> EngineCore::advance_constraints(const SchedulerOutput& sched,
                                                                          const StepOutput& result) {
  struct Work {
    size_t row;
    Sequence* seq;
    TokenConstraint* constraint;
  };
  std::vector<Work> work;
  size_t rows = 0;
  for (const ScheduledChunk& c : sched.chunks) {
    if (!c.sample) continue;
    TokenConstraint* constraint = c.seq->request->constraint(c.seq->index);
    if (constraint != nullptr && !c.seq->finished()) work.push_back({rows, c.seq, constraint});
    ++rows;
  }
  if (work.size() < kParallelConstraints) return {};
  const bool speculative = !result.accepted.empty();
  std::vector<ConstraintAdvance> out(rows);
  // Each task touches only its own choice's constraint and its own entry of `out`;
  // the sequences are read, not written.
  auto advance = [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const Work& job = work[static_cast<size_t>(w)];
      ConstraintAdvance& a = out[job.row];
      std::vector<int32_t> tokens;
      if (speculative) {
        for (const SampledToken& t : result.accepted[job.row]) tokens.push_back(t.token);
      }
      tokens.push_back(result.sampled[job.row].token);
      for (int32_t t : tokens) {
        if (t < 0 || t >= vocab_size_) break;  // the serial loop fails the request at this token
        try {
          if (!job.constraint->accept_token(t)) break;
        } catch (const std::exception&) {
          break;  // append_token meets the same refusal and reports it
        }
        ++a.accepted;
      }
      const Request& req = *job.seq->request;
      if (a.accepted < tokens.size() || req.sampling.logprobs) continue;
      // The sequence holds its accepted drafts already (for commit), not yet its sampled token.
      const int after = job.seq->num_tokens() - (speculative ? static_cast<int>(result.accepted[job.row].size()) : 0) +
                        static_cast<int>(tokens.size());
      const int room = std::min(req.sampling.max_tokens - (after - job.seq->num_prompt_tokens),
                                config_.max_model_len - after);
      a.forced_ready = true;
      if (room <= 0) continue;
      try {
        a.forced = job.constraint->forced_tokens(room);
      } catch (const std::exception& e) {
        a.forced_error = e.what();
      }
    }
  };
  ThreadPool::global().parallel_for(0, static_cast<int64_t>(work.size()), advance);
  return out;
}

void EngineCore::jump_forward(Sequence& seq, Clock::time_point now, const ConstraintAdvance* ready) {
  Request& req = *seq.request;
  TokenConstraint* constraint = req.constraint(seq.index);
  if (!constraint) return;
  // Forced tokens come without logprobs; a request that asks for them samples every token.
  if (req.sampling.logprobs) return;
  std::vector<int32_t> forced;
  if (ready != nullptr) {
    if (!ready->forced_error.empty()) {
      fail_request(req, "structured output failed: " + ready->forced_error);
      return;
    }
    forced = ready->forced;
  } else {
    const int room =
        std::min(req.sampling.max_tokens - seq.num_output_tokens(), config_.max_model_len - seq.num_tokens());
    if (room <= 0) return;
    try {
      forced = constraint->forced_tokens(room);
    } catch (const std::exception& e) {
      fail_request(req, std::string("structured output failed: ") + e.what());
      return;
    }
  }
  for (int32_t token : forced) {
    if (seq.finished()) break;
    if (token < 0 || token >= vocab_size_) {
      fail_request(req, fmt::format("structured output forced token id {} outside the vocabulary", token));
      return;
    }
    append_token(seq, SampledToken{token, 0.0f, {}}, now, /*forced=*/true);
  }
}

void EngineCore::append_token(Sequence& seq, const SampledToken& sampled, Clock::time_point now, bool forced) {
  Request& req = *seq.request;
  seq.tokens.push_back(sampled.token);
  seq.pending_tokens.push_back(sampled.token);
  if (req.sampling.logprobs) seq.pending_logprobs.push_back({sampled.token, sampled.logprob, sampled.top_logprobs});
  {
    std::lock_guard lock(stats_mutex_);
    stats_.generation_tokens++;
    if (!req.has_first_token) {
      stats_.prompt_tokens += static_cast<uint64_t>(req.num_prompt_tokens());
      stats_.time_to_first_token.observe(seconds(now - req.arrival_time));
    } else if (seq.last_token_time != Clock::time_point{}) {
      stats_.inter_token_latency.observe(seconds(now - seq.last_token_time));
    }
  }
  if (!req.has_first_token) {
    req.has_first_token = true;
    req.first_token_time = now;
  }
  seq.last_token_time = now;
  mark_news(req);
  if (TokenConstraint* constraint = req.constraint(seq.index); constraint && !forced) {
    bool accepted = false;
    try {
      accepted = constraint->accept_token(sampled.token);
    } catch (const std::exception& e) {
      fail_request(req, std::string("structured output failed: ") + e.what());
      return;
    }
    if (!accepted) {
      fail_request(req, fmt::format("structured output: token {} does not fit the grammar", sampled.token));
      return;
    }
  }
  try {
    check_stop(seq, sampled.token);
  } catch (const std::exception& e) {
    fail_request(req, std::string("stop string check failed: ") + e.what());
  }
}

void EngineCore::check_stop(Sequence& seq, int32_t token) {
  Request& req = *seq.request;
  const SamplingParams& s = req.sampling;
  const int num_out = seq.num_output_tokens();
  FinishReason reason = FinishReason::kNone;
  StopReason stop_reason;
  bool stopped_by_token = false;
  if (seq.num_tokens() >= config_.max_model_len || num_out >= s.max_tokens) {
    reason = FinishReason::kLength;
  } else if (num_out >= s.min_tokens) {
    if (!s.ignore_eos && std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(), token) !=
                             config_.eos_token_ids.end()) {
      reason = FinishReason::kStop;
      stopped_by_token = true;
    } else if (std::find(s.stop_token_ids.begin(), s.stop_token_ids.end(), token) != s.stop_token_ids.end()) {
      reason = FinishReason::kStop;
      stop_reason = token;
      stopped_by_token = true;
    }
  }
  if (!stopped_by_token && req.stop_hook) {
    const int32_t one[] = {token};
    const bool may_stop = num_out > s.min_tokens;
    StopCheck check = req.stop_hook->on_tokens(seq.index, one, may_stop);
    seq.pending_text += check.text;
    if (may_stop && check.matched_stop) {
      reason = FinishReason::kStop;
      stop_reason = std::move(*check.matched_stop);
    }
  }
  if (reason != FinishReason::kNone) {
    seq.stop_reason = std::move(stop_reason);
    scheduler_->finish(seq, reason);
  }
}

std::vector<RequestOutput> EngineCore::collect_outputs(Clock::time_point now) {
  std::vector<RequestOutput> outputs;
  outputs.reserve(with_news_.size());
  for (Request* req : with_news_) {
    req->has_news = false;
    RequestOutput out;
    out.request_id = req->id;
    out.num_prompt_tokens = req->num_prompt_tokens();
    out.num_cached_tokens = req->num_cached_tokens;
    out.finished = req->finished();
    out.error_message = req->error_message;
    out.error_status = req->error_status;
    if (req->scores_prompt() && req->has_first_token) {
      out.prompt_logprobs = std::move(req->prompt_logprobs);
      req->prompt_logprobs_sent = true;
    }
    for (auto& seq_ptr : req->seqs) {
      Sequence& seq = *seq_ptr;
      if (seq.pending_tokens.empty() && !seq.pending_finish) continue;
      CompletionOutput c;
      c.index = seq.index;
      c.new_token_ids = std::move(seq.pending_tokens);
      c.logprobs = std::move(seq.pending_logprobs);
      c.text = std::move(seq.pending_text);
      c.num_output_tokens = seq.num_output_tokens();
      if (seq.pending_finish) {
        c.finish_reason = seq.finish_reason;
        c.stop_reason = seq.stop_reason;
      }
      seq.pending_tokens.clear();
      seq.pending_logprobs.clear();
      seq.pending_text.clear();
      seq.pending_finish = false;
      out.outputs.push_back(std::move(c));
    }
    outputs.push_back(std::move(out));
    if (req->finished()) {
      record_finished(*req, now);
      requests_.erase(req->id);
    }
  }
  with_news_.clear();
  {
    std::lock_guard lock(stats_mutex_);
    stats_.num_requests_running = scheduler_->num_running_seqs();
    stats_.num_requests_waiting = scheduler_->num_waiting_seqs();
    stats_.kv_cache_usage = scheduler_->block_pool().usage();
    stats_.state_slot_usage = scheduler_->slot_pool().usage();
  }
  return outputs;
}

}  // namespace hyllm
