#include "engine/scheduler.h"

#include <algorithm>

#include "util/status.h"

namespace hyllm {

Scheduler::Scheduler(const EngineConfig& config, int num_blocks, int num_state_slots)
    : config_(config), blocks_(num_blocks), slots_(num_state_slots) {}

void Scheduler::add_request(Request& request) {
  HYLLM_CHECK(request.seqs.size() == 1, "a new request has one sequence, got {}", request.seqs.size());
  Sequence& seq = *request.seqs.front();
  seq.status = SeqStatus::kWaiting;
  waiting_.push_back(&seq);
}

int Scheduler::target_tokens(const Sequence& seq) const {
  return seq.request->awaiting_fork() ? seq.request->fork_point() : seq.num_tokens();
}

bool Scheduler::allocate_blocks(Sequence& seq, int num_new, SchedulerOutput& out) {
  const int bs = config_.block_size;
  const int start = seq.num_computed_tokens;
  const int end = start + num_new;
  const int blocks_needed = (end + bs - 1) / bs - static_cast<int>(seq.block_table.size());
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

void Scheduler::release_resources(Sequence& seq) {
  for (int32_t b : seq.block_table) blocks_.release(b);
  seq.block_table.clear();
  if (seq.state_slot >= 0) slots_.release(seq.state_slot);
  seq.state_slot = -1;
  seq.num_computed_tokens = 0;
  Request& req = *seq.request;
  if (seq.index == 0 && req.awaiting_fork()) {
    for (int32_t s : req.reserved_slots) slots_.release(s);
    num_reserved_slots_ -= static_cast<int>(req.reserved_slots.size());
    req.reserved_slots.clear();
  }
}

void Scheduler::preempt(Sequence& victim, SchedulerOutput& out) {
  HYLLM_CHECK(!running_.empty() && running_.back() == &victim, "preempting a sequence that is not the newest");
  running_.pop_back();
  release_resources(victim);
  out.finished_seq_ids.push_back(victim.seq_id);
  victim.status = SeqStatus::kWaiting;
  waiting_.push_front(&victim);
  out.num_preempted++;
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
    for (int32_t b : child->block_table) blocks_.add_ref(b);
    child->state_slot = req.reserved_slots[static_cast<size_t>(c - 1)];
    if (parent.num_computed_tokens > 0) out.state_slot_copies.emplace_back(parent.state_slot, child->state_slot);
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

bool Scheduler::admit_head(int& budget, SchedulerOutput& out) {
  Sequence& seq = *waiting_.front();
  Request& req = *seq.request;
  const bool reserve = seq.index == 0 && req.awaiting_fork();
  const int slots_needed = reserve ? req.n() : 1;
  if (static_cast<int>(running_.size()) + num_reserved_slots_ + slots_needed > config_.max_num_seqs) return false;
  if (slots_.num_free() < slots_needed) return false;
  const int num_new = std::min(target_tokens(seq) - seq.num_computed_tokens, budget);
  if (num_new > 0 && !allocate_blocks(seq, num_new, out)) return false;

  waiting_.pop_front();
  seq.state_slot = slots_.allocate();
  if (reserve) {
    for (int i = 1; i < req.n(); ++i) req.reserved_slots.push_back(slots_.allocate());
    num_reserved_slots_ += req.n() - 1;
  }
  seq.seq_id = next_seq_id_++;
  seq.status = SeqStatus::kRunning;
  running_.push_back(&seq);
  if (num_new > 0) {
    out.chunks.push_back({&seq, seq.num_computed_tokens, num_new,
                          seq.num_computed_tokens + num_new == seq.num_tokens() && !req.awaiting_fork()});
    budget -= num_new;
  } else {
    // A one-token prompt with n > 1 forks before computing anything; the
    // choices start with the next step.
    fork(running_.size() - 1, out);
  }
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  out.finished_seq_ids = std::move(left_running_);
  left_running_.clear();
  int budget = config_.max_num_batched_tokens;

  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& seq = *running_[i];
    if (seq.request->awaiting_fork() && seq.num_computed_tokens == seq.request->fork_point()) fork(i, out);
    const int num_new = std::min(target_tokens(seq) - seq.num_computed_tokens, budget);
    HYLLM_CHECK(num_new > 0, "running sequence {} has nothing to compute", seq.seq_id);
    bool preempted_self = false;
    while (!allocate_blocks(seq, num_new, out)) {
      Sequence& victim = *running_.back();
      preempt(victim, out);
      if (&victim == &seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    out.chunks.push_back({&seq, seq.num_computed_tokens, num_new,
                          seq.num_computed_tokens + num_new == seq.num_tokens() && !seq.request->awaiting_fork()});
    budget -= num_new;
    ++i;
  }

  if (out.num_preempted == 0) {
    while (!waiting_.empty() && budget > 0 && admit_head(budget, out)) {
    }
  }
  for (const ScheduledChunk& c : out.chunks) out.num_scheduled_tokens += c.num_tokens;
  return out;
}

void Scheduler::commit(const SchedulerOutput& output) {
  for (const ScheduledChunk& c : output.chunks) {
    HYLLM_CHECK(c.seq->num_computed_tokens == c.start_pos, "sequence {} changed during its step", c.seq->seq_id);
    c.seq->num_computed_tokens += c.num_tokens;
  }
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
  release_resources(seq);
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
