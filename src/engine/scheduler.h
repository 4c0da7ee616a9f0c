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
//
// Prefix caching (kv/kv_cache_manager.h): an admitted sequence starts after
// the longest prefix whose KV blocks and GDN state snapshot are cached; it
// shares the full blocks, copies the snapshot into its live slot and a
// partial tail block into a block of its own. Snapshots are saved at block
// boundaries: where a sequence passes one at the end of a step (a chunk cut
// short by the budget ends on a block boundary; a sequence whose cached KV
// blocks reach further than the cached state ends a chunk where those
// blocks end, so that the next request with that prefix hits it all), and
// inside the last chunk of a prompt, at the prompt's last block boundary:
// that chunk runs to the prompt's end and samples, and the GDN layers write
// the state at the boundary into a reserved slot in the same forward
// (ScheduledChunk::save_slot). A sequence that finishes or is preempted
// keeps its live slot as a snapshot at its computed length. The copies a
// step needs run before its forward, in the order listed: snapshot saves of
// the previous step first, then restores, copies on write and forks, so a
// slot or block reused within the step is read before it is overwritten.
// Slots for saves inside the step are reserved after every admission, so
// they never keep a sequence out; they hold no snapshot until the step ran,
// so nothing of the step reads or copies them.

// Speculative decoding (config.num_speculative_tokens = K > 0): a running
// sequence whose tokens are all computed but the last, and which holds
// drafts, is scheduled as 1 + d tokens (its last token and d <= K drafts,
// fewer when the budget or max_model_len is short), all from the step's
// token budget; every chunk that samples also gets KV blocks for K
// lookahead positions past its end, where the MTP head writes the KV of the
// drafts it proposes (the next verify step writes there anyway).
//
// Prompt logprobs: a chunk of a request that scores its prompt scores every
// position in it that has a prompt token after it (the executor scores in
// passes, so the token budget is the only limit). Requests that score their
// prompt skip the prefix-cache lookup: every position is computed.

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "engine/engine_config.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/request.h"

namespace hyllm {

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int start_pos = 0;     // seq->num_computed_tokens when scheduled
  int num_tokens = 0;
  bool sample = false;   // the chunk ends at the sequence's last token
  // Speculative decoding: the chunk's last num_drafts tokens are seq->draft_tokens
  // (after seq->tokens). After the step the engine sets num_tokens to the
  // tokens that were accepted (1 + accepted drafts) before commit().
  int num_drafts = 0;
  // Prefix caching: the step also saves the sequence's GDN state after
  // position save_pos - 1 (a block boundary inside the chunk) into
  // save_slot, a live slot that commit() turns into the snapshot there.
  int save_pos = 0;
  int32_t save_slot = -1;
  // Prompt logprobs: positions [start_pos, start_pos + num_scored) are scored.
  int num_scored = 0;
};

// A snapshot whose state copy is in this step: undone when the step fails.
struct SnapshotSave {
  int32_t slot = -1;
  uint64_t generation = 0;
};

// One prefix-cache lookup at a request's first admission.
struct PrefixLookup {
  int num_prompt_tokens = 0;
  int num_cached_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<std::pair<int32_t, int32_t>> kv_block_copies;
  std::vector<std::pair<int32_t, int32_t>> state_slot_copies;
  std::vector<int64_t> finished_seq_ids;  // left the running set since the last step
  std::vector<SnapshotSave> snapshot_saves;
  std::vector<PrefixLookup> prefix_lookups;
  // Sequences whose cache this step's copies fill (prefix hits, forks): if
  // the step fails they fail too, scheduled or not.
  std::vector<Sequence*> copied_into;
  int num_preempted = 0;
  int num_scheduled_tokens = 0;
  // Nothing to compute and nothing to copy: the executor is not called.
  bool empty() const { return chunks.empty() && kv_block_copies.empty() && state_slot_copies.empty(); }
};

class Scheduler {
 public:
  Scheduler(const EngineConfig& config, int num_blocks, int num_state_slots);

  // Queues choice 0 of a new request (FCFS).
  void add_request(Request& request);
  SchedulerOutput schedule();
  // After the step ran: the scheduled tokens are now in the cache; caches
  // the blocks they filled and queues state snapshots at block boundaries.
  void commit(const SchedulerOutput& output);
  // After the step failed: forgets the snapshots whose copies it held.
  void discard(const SchedulerOutput& output);
  // Forgets every cached prefix (POST /reset_prefix_cache). Refused (false)
  // while sequences run, unless preempt_running, which preempts them first.
  bool reset_prefix_cache(bool preempt_running);
  // Frees the sequence's blocks and slot and takes it out of the queues.
  void finish(Sequence& seq, FinishReason reason);
  // Finishes every unfinished choice of the request with `reason`.
  void finish_request(Request& request, FinishReason reason);

  int num_running_seqs() const { return static_cast<int>(running_.size()); }
  int num_waiting_seqs() const { return static_cast<int>(waiting_.size()); }
  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  const BlockPool& block_pool() const { return cache_.blocks(); }
  const StateSlotPool& slot_pool() const { return cache_.slots(); }
  const KvCacheManager& cache() const { return cache_; }
  // Snapshot copies queued for the next step.
  int num_pending_saves() const { return static_cast<int>(pending_saves_.size()); }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }

 private:
  // Tokens this sequence should have computed after its next chunks.
  int target_tokens(const Sequence& seq) const;
  // Tokens of its next chunk within `budget` (>= 1 when budget >= 1 and it has any left).
  int chunk_tokens(const Sequence& seq, int budget) const;
  // Prompt positions a chunk of num_new tokens from the computed count scores.
  int scored_positions(const Sequence& seq, int num_new) const;
  // KV positions a chunk of num_new tokens ending the sequence needs past its
  // end for the drafts the MTP head writes (0 unless speculating).
  int lookahead(const Sequence& seq, int num_new) const;
  // Blocks (and a copy on write) for num_new more tokens; false if not enough free.
  bool allocate_blocks(Sequence& seq, int num_new, SchedulerOutput& out);
  // Frees the sequence's blocks and slot; keep_state leaves its state as a snapshot.
  void release_resources(Sequence& seq, bool keep_state);
  void preempt(Sequence& victim, std::vector<int64_t>& left_ids);
  // Takes the prefix hit of a sequence being admitted: shares its blocks and
  // queues the copies; false (nothing changed) when the blocks for the hit
  // and `num_new` more tokens are not free.
  bool take_prefix_hit(Sequence& seq, const PrefixHit& hit, int num_new, SchedulerOutput& out);
  void queue_snapshot_save(Sequence& seq, int num_tokens);
  // The block boundary inside the chunk where its state is saved in the
  // step (the prompt's last boundary when the chunk ends the prompt), or 0.
  int save_point(const ScheduledChunk& c) const;
  // Reserves the slots of the saves inside this step's chunks.
  void reserve_saves(SchedulerOutput& out);
  // Creates choices 1..n-1 right after running_[parent_pos].
  void fork(size_t parent_pos, SchedulerOutput& out);
  // Admits the head of the waiting queue; false when it does not fit now.
  bool admit_head(int& budget, SchedulerOutput& out);

  struct PendingSave {
    int32_t src = -1, dst = -1;
    uint64_t generation = 0;
  };

  EngineConfig config_;
  KvCacheManager cache_;
  BlockPool& blocks_;
  StateSlotPool& slots_;
  std::vector<PendingSave> pending_saves_;
  std::vector<Sequence*> running_;  // admission order: the back is the newest
  std::deque<Sequence*> waiting_;
  int num_reserved_slots_ = 0;      // held by unforked n > 1 requests
  int64_t next_seq_id_ = 0;
  uint64_t num_preemptions_ = 0;
  std::vector<int64_t> left_running_;  // for the next SchedulerOutput::finished_seq_ids
};

}  // namespace hyllm
