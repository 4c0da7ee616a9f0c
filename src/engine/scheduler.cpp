#include "engine/scheduler.h"

#include <algorithm>

#include "util/status.h"

namespace hyllm {

Scheduler::Scheduler(const EngineConfig& config, int num_blocks, int num_state_slots)
    : config_(config),
      cache_(num_blocks, config.block_size, num_state_slots, config.enable_prefix_caching),
      blocks_(cache_.blocks()),
      slots_(cache_.slots()) {}

void Scheduler::add_request(Request& request) {
  HYLLM_CHECK(request.seqs.size() == 1, "a new request has one sequence, got {}", request.seqs.size());
  Sequence& seq = *request.seqs.front();
  seq.status = SeqStatus::kWaiting;
  waiting_.push_back(&seq);
}

int Scheduler::target_tokens(const Sequence& seq) const {
  return seq.request->awaiting_fork() ? seq.request->fork_point() : seq.num_tokens();
}

int Scheduler::chunk_tokens(const Sequence& seq, int budget) const {
  const int start = seq.num_computed_tokens;
  const int target = target_tokens(seq);
  int end = std::min(target, start + budget);
  if (!cache_.caching() || end <= start) return end - start;
  const int bs = config_.block_size;
  const auto round_down = [bs](int n) { return n / bs * bs; };
  if (seq.cached_block_end > start && seq.cached_block_end < end) {
    end = seq.cached_block_end;                 // save the state where the cached blocks end
  } else if (end < target && round_down(end) > start) {
    end = round_down(end);                      // a budget-cut chunk ends on a boundary
  }
  // (A chunk that ends the prompt saves at its last boundary inside the step: save_point.)
  return end - start;
}

int Scheduler::scored_positions(const Sequence& seq, int num_new) const {
  if (!seq.request->scores_prompt()) return 0;
  const int start = seq.num_computed_tokens;
  return std::max(0, std::min(start + num_new, seq.num_prompt_tokens - 1) - start);
}

int Scheduler::save_point(const ScheduledChunk& c) const {
  if (!cache_.caching() || c.num_drafts > 0) return 0;
  const int end = c.start_pos + c.num_tokens;
  const int boundary = end / config_.block_size * config_.block_size;
  return end == target_tokens(*c.seq) && boundary > c.start_pos && boundary < end ? boundary : 0;
}

void Scheduler::reserve_saves(SchedulerOutput& out) {
  for (ScheduledChunk& c : out.chunks) {
    const int at = save_point(c);
    if (at == 0) continue;
    const int32_t slot = cache_.reserve_snapshot(c.seq->tokens, at, c.seq->block_hashes);
    if (slot < 0) continue;
    c.save_pos = at;
    c.save_slot = slot;
  }
}

int Scheduler::lookahead(const Sequence& seq, int num_new) const {
  const int end = seq.num_computed_tokens + num_new;
  if (config_.num_speculative_tokens == 0 || end < seq.num_tokens()) return 0;
  return std::max(0, std::min(config_.num_speculative_tokens, config_.max_model_len - end));
}

bool Scheduler::allocate_blocks(Sequence& seq, int num_new, SchedulerOutput& out) {
  const int bs = config_.block_size;
  const int start = seq.num_computed_tokens;
  const int end = start + num_new;
  const int blocks_needed = (end + lookahead(seq, num_new) + bs - 1) / bs - static_cast<int>(seq.block_table.size());
  // The block holding position `start` is written by this chunk; if another
  // choice shares it, this sequence writes into a private copy.
  const bool copy_on_write = start % bs != 0 && blocks_.ref_count(seq.block_table[start / bs]) > 1;
  const int total = std::max(blocks_needed, 0) + (copy_on_write ? 1 : 0);
  if (blocks_.num_free() < total) return false;
  if (copy_on_write) {
    int32_t& entry = seq.block_table[static_cast<size_t>(start / bs)];
    const int32_t copy = blocks_.allocate();
    out.kv_block_copies.emplace_back(entry, copy);
    blocks_.release(entry);
    entry = copy;
  }
  for (int i = 0; i < blocks_needed; ++i) seq.block_table.push_back(blocks_.allocate());
  return true;
}

void Scheduler::release_resources(Sequence& seq, bool keep_state) {
  const int bs = config_.block_size;
  const int computed = seq.num_computed_tokens;
  // (A sequence that stopped at an accepted draft has computed tokens past its end: no snapshot.)
  if (keep_state && seq.state_slot >= 0 && computed > 0 && computed <= seq.num_tokens() && cache_.caching()) {
    const int32_t tail = computed % bs != 0 ? seq.block_table[static_cast<size_t>(computed / bs)] : -1;
    if (cache_.keep_state(seq.tokens, computed, seq.state_slot, tail, seq.block_hashes)) seq.state_slot = -1;
  }
  // Last blocks first: they join the free queue first and are evicted first.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) blocks_.release(*it);
  seq.block_table.clear();
  if (seq.state_slot >= 0) slots_.release(seq.state_slot);
  seq.state_slot = -1;
  seq.num_computed_tokens = 0;
  seq.cached_block_end = 0;
  seq.draft_tokens.clear();
  Request& req = *seq.request;
  if (seq.index == 0 && req.awaiting_fork()) {
    for (int32_t s : req.reserved_slots) slots_.release(s);
    num_reserved_slots_ -= static_cast<int>(req.reserved_slots.size());
    req.reserved_slots.clear();
  }
}

void Scheduler::preempt(Sequence& victim, std::vector<int64_t>& left_ids) {
  HYLLM_CHECK(!running_.empty() && running_.back() == &victim, "preempting a sequence that is not the newest");
  running_.pop_back();
  release_resources(victim, /*keep_state=*/true);
  left_ids.push_back(victim.seq_id);
  victim.status = SeqStatus::kWaiting;
  waiting_.push_front(&victim);
  num_preemptions_++;
}

void Scheduler::fork(size_t parent_pos, SchedulerOutput& out) {
  Sequence& parent = *running_[parent_pos];
  Request& req = *parent.request;
  HYLLM_CHECK(static_cast<int>(req.reserved_slots.size()) == req.n() - 1, "fork without reserved slots");
  std::vector<Sequence*> children;
  for (int c = 1; c < req.n(); ++c) {
    auto child = std::make_unique<Sequence>();
    child->request = &req;
    child->index = c;
    child->seq_id = next_seq_id_++;
    child->tokens = parent.tokens;
    child->num_prompt_tokens = parent.num_prompt_tokens;
    child->num_computed_tokens = parent.num_computed_tokens;
    child->block_table = parent.block_table;
    child->block_hashes = parent.block_hashes;
    for (int32_t b : child->block_table) blocks_.add_ref(b);
    child->state_slot = req.reserved_slots[static_cast<size_t>(c - 1)];
    if (parent.num_computed_tokens > 0) {
      out.state_slot_copies.emplace_back(parent.state_slot, child->state_slot);
      out.copied_into.push_back(child.get());
    }
    child->status = SeqStatus::kRunning;
    child->seed = req.base_seed + static_cast<uint64_t>(c);
    children.push_back(child.get());
    req.seqs.push_back(std::move(child));
  }
  num_reserved_slots_ -= static_cast<int>(req.reserved_slots.size());
  req.reserved_slots.clear();
  req.forked = true;
  running_.insert(running_.begin() + static_cast<std::ptrdiff_t>(parent_pos) + 1, children.begin(), children.end());
}

bool Scheduler::take_prefix_hit(Sequence& seq, const PrefixHit& hit, int num_new, SchedulerOutput& out) {
  const int bs = config_.block_size;
  const int h = hit.num_tokens;
  // Hold the hit's blocks first, so that allocating the others cannot evict them.
  for (int32_t b : hit.blocks) blocks_.add_ref(b);
  if (hit.tail_block >= 0) blocks_.add_ref(hit.tail_block);
  const int shared = static_cast<int>(hit.blocks.size());
  seq.num_computed_tokens = h;
  const int ahead = lookahead(seq, num_new);
  seq.num_computed_tokens = 0;
  if (blocks_.num_free() < (h + num_new + ahead + bs - 1) / bs - shared) {
    for (int32_t b : hit.blocks) blocks_.release(b);
    if (hit.tail_block >= 0) blocks_.release(hit.tail_block);
    return false;
  }
  slots_.touch(hit.snapshot_slot);
  seq.block_table = hit.blocks;
  if (hit.tail_block >= 0) {
    const int32_t own = blocks_.allocate();
    out.kv_block_copies.emplace_back(hit.tail_block, own);
    seq.block_table.push_back(own);
    blocks_.release(hit.tail_block);
  }
  seq.num_computed_tokens = h;
  return true;
}

bool Scheduler::admit_head(int& budget, SchedulerOutput& out) {
  Sequence& seq = *waiting_.front();
  Request& req = *seq.request;
  const bool reserve = seq.index == 0 && req.awaiting_fork();
  const int slots_needed = reserve ? req.n() : 1;
  if (static_cast<int>(running_.size()) + num_reserved_slots_ + slots_needed > config_.max_num_seqs) return false;
  if (slots_.num_available() < slots_needed) return false;

  // At least the last token is computed: its logits are sampled.
  const bool scores = req.scores_prompt();
  const PrefixHit hit = scores ? PrefixHit{} : cache_.find(seq.tokens, seq.num_tokens() - 1, seq.block_hashes);
  seq.num_computed_tokens = hit.num_tokens;
  seq.cached_block_end = hit.cached_block_tokens > hit.num_tokens ? hit.cached_block_tokens : 0;
  const int num_new = chunk_tokens(seq, budget);
  const int num_scored = scored_positions(seq, num_new);
  seq.num_computed_tokens = 0;
  const bool fits = hit.num_tokens > 0 ? take_prefix_hit(seq, hit, num_new, out)
                                       : num_new == 0 || allocate_blocks(seq, num_new, out);
  if (!fits) {
    seq.cached_block_end = 0;
    return false;
  }
  if (hit.num_tokens > 0 && num_new > 0) {
    HYLLM_CHECK(allocate_blocks(seq, num_new, out), "blocks for a prefix hit were counted free");
  }

  waiting_.pop_front();
  seq.state_slot = slots_.allocate();
  if (hit.num_tokens > 0) {
    // (The same slot: the snapshot was the only one to evict, and its state is already there.)
    if (hit.snapshot_slot != seq.state_slot) out.state_slot_copies.emplace_back(hit.snapshot_slot, seq.state_slot);
    out.copied_into.push_back(&seq);
  }
  if (reserve) {
    for (int i = 1; i < req.n(); ++i) req.reserved_slots.push_back(slots_.allocate());
    num_reserved_slots_ += req.n() - 1;
  }
  if (!req.admitted_once) {
    req.admitted_once = true;
    req.num_cached_tokens = hit.num_tokens;
    if (cache_.caching() && !scores) out.prefix_lookups.push_back({seq.num_prompt_tokens, hit.num_tokens});
  }
  seq.seq_id = next_seq_id_++;
  seq.status = SeqStatus::kRunning;
  running_.push_back(&seq);
  if (num_new > 0) {
    ScheduledChunk chunk{&seq, seq.num_computed_tokens, num_new,
                         seq.num_computed_tokens + num_new == seq.num_tokens() && !req.awaiting_fork()};
    chunk.num_scored = num_scored;
    out.chunks.push_back(chunk);
    budget -= num_new;
  } else {
    // A prompt whose tokens but the last are all cached (or a one-token
    // prompt) with n > 1 forks before computing anything; the choices
    // start with the next step.
    fork(running_.size() - 1, out);
  }
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  out.finished_seq_ids = std::move(left_running_);
  left_running_.clear();
  // The states saved at the end of the previous step, before anything else.
  for (const PendingSave& p : pending_saves_) {
    if (!slots_.is_snapshot(p.dst) || slots_.generation(p.dst) != p.generation) continue;  // evicted since
    out.state_slot_copies.emplace_back(p.src, p.dst);
    out.snapshot_saves.push_back({p.dst, p.generation});
  }
  pending_saves_.clear();
  int budget = config_.max_num_batched_tokens;

  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& seq = *running_[i];
    if (seq.request->awaiting_fork() && seq.num_computed_tokens == seq.request->fork_point()) fork(i, out);
    // Drafts ride along only when the last token is all that is left to compute.
    int num_drafts = 0;
    if (!seq.draft_tokens.empty() && seq.num_computed_tokens == seq.num_tokens() - 1) {
      num_drafts = std::min({static_cast<int>(seq.draft_tokens.size()), budget - 1,
                             config_.max_model_len - seq.num_tokens()});
      num_drafts = std::max(num_drafts, 0);
    }
    seq.draft_tokens.resize(static_cast<size_t>(num_drafts));
    const int num_new = num_drafts > 0 ? 1 + num_drafts : chunk_tokens(seq, budget);
    HYLLM_CHECK(num_new > 0, "running sequence {} has nothing to compute", seq.seq_id);
    bool preempted_self = false;
    while (!allocate_blocks(seq, num_new, out)) {
      Sequence& victim = *running_.back();
      preempt(victim, out.finished_seq_ids);
      out.num_preempted++;
      if (&victim == &seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    const bool sample = seq.num_computed_tokens + num_new - num_drafts == seq.num_tokens() &&
                        !seq.request->awaiting_fork();
    ScheduledChunk chunk{&seq, seq.num_computed_tokens, num_new, sample, num_drafts};
    chunk.num_scored = scored_positions(seq, num_new);
    out.chunks.push_back(chunk);
    budget -= num_new;
    ++i;
  }

  if (out.num_preempted == 0) {
    while (!waiting_.empty() && budget > 0 && admit_head(budget, out)) {
    }
  }
  reserve_saves(out);
  for (const ScheduledChunk& c : out.chunks) out.num_scheduled_tokens += c.num_tokens;
  return out;
}

void Scheduler::queue_snapshot_save(Sequence& seq, int num_tokens) {
  const int32_t dst = cache_.save_snapshot(seq.tokens, num_tokens, seq.block_hashes);
  if (dst >= 0) pending_saves_.push_back({seq.state_slot, dst, slots_.generation(dst)});
}

void Scheduler::commit(const SchedulerOutput& output) {
  const int bs = config_.block_size;
  for (const ScheduledChunk& c : output.chunks) {
    Sequence& seq = *c.seq;
    HYLLM_CHECK(seq.num_computed_tokens == c.start_pos, "sequence {} changed during its step", seq.seq_id);
    const int end = c.start_pos + c.num_tokens;
    seq.num_computed_tokens = end;
    if (!cache_.caching()) continue;
    cache_.cache_full_blocks(seq.tokens, seq.block_table, c.start_pos / bs, end / bs, seq.block_hashes);
    if (c.save_slot >= 0 && !cache_.keep_state(seq.tokens, c.save_pos, c.save_slot, -1, seq.block_hashes)) {
      slots_.release(c.save_slot);  // another sequence of the step saved the same prefix
    }
    if (seq.cached_block_end <= end) seq.cached_block_end = 0;
    // A decode step's state is kept when the sequence ends, not at every boundary.
    const bool decode =
        (c.num_tokens == 1 || c.num_drafts > 0) && end == seq.num_tokens() && seq.num_output_tokens() > 0;
    if (end % bs == 0 && !decode) queue_snapshot_save(seq, end);
  }
}

void Scheduler::discard(const SchedulerOutput& output) {
  for (const ScheduledChunk& c : output.chunks) {
    if (c.save_slot >= 0) slots_.release(c.save_slot);
  }
  for (const SnapshotSave& s : output.snapshot_saves) {
    if (slots_.is_snapshot(s.slot) && slots_.generation(s.slot) == s.generation) slots_.drop(s.slot);
  }
}

bool Scheduler::reset_prefix_cache(bool preempt_running) {
  if (!running_.empty() && !preempt_running) return false;
  while (!running_.empty()) {
    Sequence& victim = *running_.back();
    running_.pop_back();
    release_resources(victim, /*keep_state=*/false);
    left_running_.push_back(victim.seq_id);
    victim.status = SeqStatus::kWaiting;
    waiting_.push_front(&victim);
    num_preemptions_++;
  }
  pending_saves_.clear();
  cache_.reset();
  return true;
}

void Scheduler::finish(Sequence& seq, FinishReason reason) {
  if (seq.finished()) return;
  if (seq.status == SeqStatus::kRunning) {
    auto it = std::find(running_.begin(), running_.end(), &seq);
    HYLLM_CHECK(it != running_.end(), "running sequence {} not in the running set", seq.seq_id);
    running_.erase(it);
    left_running_.push_back(seq.seq_id);
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), &seq);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  // A failed step may have written past the computed tokens: keep nothing.
  release_resources(seq, /*keep_state=*/reason != FinishReason::kError);
  seq.status = SeqStatus::kFinished;
  seq.finish_reason = reason;
  seq.pending_finish = true;
  seq.request->num_finished++;
}

void Scheduler::finish_request(Request& request, FinishReason reason) {
  // Choices not yet forked never started: they finish with the request.
  if (request.awaiting_fork()) {
    finish(*request.seqs.front(), reason);
    for (int c = 1; c < request.n(); ++c) {
      auto child = std::make_unique<Sequence>();
      child->request = &request;
      child->index = c;
      child->tokens = request.seqs.front()->tokens;
      child->tokens.resize(static_cast<size_t>(request.num_prompt_tokens()));
      child->num_prompt_tokens = request.num_prompt_tokens();
      child->status = SeqStatus::kFinished;
      child->finish_reason = reason;
      child->pending_finish = true;
      request.seqs.push_back(std::move(child));
      request.num_finished++;
    }
    request.forked = true;
    return;
  }
  for (auto& seq : request.seqs) finish(*seq, reason);
}

}  // namespace hyllm
