#pragma once
// The scheduler: vLLM V1's single token budget per step, spent first on the
// running sequences (oldest first: a decode token, or the next prompt chunk),
// then on admitting waiting sequences in FCFS order. There are no prefill and
// decode phases: every sequence catches its computed count up to its token
// count, in chunks as large as the budget allows.
//
// When a running sequence cannot get KV blocks, the newest running sequence
// is preempted by recompute: its blocks and slot are freed, its computed count
// resets (its output tokens are kept) and it rejoins the front of the waiting
// queue. A step that preempted admits nobody. Admission stops at the first
// waiting sequence that does not fit (FCFS); requests that could never fit are
// refused before they reach the queue, so the head always fits eventually.
//
// n > 1: choice 0 is admitted holding n state slots; it computes the prompt
// but its last token, then forks: the other choices share its full blocks
// (reference counts) and copy its state slot, and every choice computes the
// last prompt token itself and samples. A shared partially filled block is
// copied before it is written (copy on write).

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "engine/engine_config.h"
#include "engine/kv/block_pool.h"
#include "engine/request.h"

namespace hyllm {

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int start_pos = 0;     // seq->num_computed_tokens when scheduled
  int num_tokens = 0;
  bool sample = false;   // the chunk ends at the sequence's last token
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<std::pair<int32_t, int32_t>> kv_block_copies;
  std::vector<std::pair<int32_t, int32_t>> state_slot_copies;
  std::vector<int64_t> finished_seq_ids;  // left the running set since the last step
  int num_preempted = 0;
  int num_scheduled_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const EngineConfig& config, int num_blocks, int num_state_slots);

  // Queues choice 0 of a new request (FCFS).
  void add_request(Request& request);
  SchedulerOutput schedule();
  // After the step ran: the scheduled tokens are now in the cache.
  void commit(const SchedulerOutput& output);
  // Frees the sequence's blocks and slot and takes it out of the queues.
  void finish(Sequence& seq, FinishReason reason);
  // Finishes every unfinished choice of the request with `reason`.
  void finish_request(Request& request, FinishReason reason);

  int num_running_seqs() const { return static_cast<int>(running_.size()); }
  int num_waiting_seqs() const { return static_cast<int>(waiting_.size()); }
  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  const BlockPool& block_pool() const { return blocks_; }
  const StateSlotPool& slot_pool() const { return slots_; }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }

 private:
  // Tokens this sequence should have computed after its next chunks.
  int target_tokens(const Sequence& seq) const;
  // Blocks (and a copy on write) for num_new more tokens; false if not enough free.
  bool allocate_blocks(Sequence& seq, int num_new, SchedulerOutput& out);
  void release_resources(Sequence& seq);
  void preempt(Sequence& victim, SchedulerOutput& out);
  // Creates choices 1..n-1 right after running_[parent_pos].
  void fork(size_t parent_pos, SchedulerOutput& out);
  // Admits the head of the waiting queue; false when it does not fit now.
  bool admit_head(int& budget, SchedulerOutput& out);

  EngineConfig config_;
  BlockPool blocks_;
  StateSlotPool slots_;
  std::vector<Sequence*> running_;  // admission order: the back is the newest
  std::deque<Sequence*> waiting_;
  int num_reserved_slots_ = 0;      // held by unforked n > 1 requests
  int64_t next_seq_id_ = 0;
  uint64_t num_preemptions_ = 0;
  std::vector<int64_t> left_running_;  // for the next SchedulerOutput::finished_seq_ids
};

}  // namespace hyllm
