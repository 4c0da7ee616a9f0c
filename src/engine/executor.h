#pragma once
// The boundary between the engine (what to compute) and a model runner (how).
// The engine plans a step as a list of sequence chunks; the executor runs the
// model over all of them at once (flat tokens, no padding) and samples each
// row marked `sample` with engine/sampler.h (or a device sampler with the
// same semantics).
//
// Call order: cache_layout() and cache_memory_budget() once, then
// allocate_cache() once, then execute() once per step, all on the engine
// thread.
//
// Invariants the engine guarantees for every SeqWork:
//  - token_ids are the sequence's tokens at positions [start_pos, start_pos + n), n >= 1;
//  - block_table covers positions [0, start_pos + n) of the attention KV cache
//    (position p lives in block block_table[p / block_size], offset p % block_size),
//    and the blocks the chunk writes are owned by this sequence alone;
//  - state_slot holds the GDN state after position start_pos - 1; start_pos == 0
//    means the executor must reset the slot (zero conv and recurrent state);
//  - a sequence appears at most once per step; a seq_id is never reused.
//
// Speculative decoding (ModelOptions::num_speculative_tokens > 0): a sampled
// SeqWork may end with num_drafts draft tokens (proposed by the previous
// step) after the sequence's last real token; the executor samples the
// target at each of the last num_drafts + 1 positions as if the tokens
// before it were the sequence's (row j: output_ids plus the first j drafts,
// sample_index + j, banned ids while the output is shorter than min_tokens),
// accepts drafts while each equals the target's sample at its position, and
// returns the accepted drafts and one more token (the target's sample after
// them): 1 to num_drafts + 1 tokens. Its GDN states are left after the last
// accepted token (KV past it is simply overwritten later). Because every row
// samples exactly as the non-speculative step at that output position would
// (same logits, context, seed and counter), the tokens are the ones decoding
// without speculation gives, for every sampling setting: the draft is a
// point mass q, and "accept d with probability p(d), else sample from p with d
// removed" is the same as "sample x ~ p, accept iff x == d".
// Then the MTP head drafts up to propose_drafts tokens for the next step; it
// runs over every scheduled token, so its KV cache follows the sequence.
// block_table covers these draft positions too (the scheduler's lookahead).//
// StepInput's copies run before the forward, in the order listed: they are
// how n > 1 choices fork from one computed prompt (state slot copies), how
// a shared partially filled KV block is made private (copy on write), and
// how the prefix cache saves and restores GDN state snapshots and copies a
// cached partial block. A step may hold copies and no sequences: then only
// the copies run.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/token_constraint.h"
#include "engine/token_logprob.h"

namespace hyllm {

// What the cache costs per unit, so the engine can size its pools.
struct CacheLayout {
  size_t kv_bytes_per_token = 0;      // all attention layers, K and V
  size_t bytes_per_state_slot = 0;    // all GDN layers, conv + recurrent state
  int num_attention_layers = 0;
  int num_gdn_layers = 0;
  // The last ids of the allocation the executor keeps for itself: the padding
  // rows of decode steps replayed from device graphs write their KV to the
  // reserved block and their GDN state to the reserved slot. The engine
  // allocates them on top of its pools and never hands them to a sequence.
  int reserved_blocks = 0;
  int reserved_state_slots = 0;
};

// What the engine decided; the executor allocates exactly this.
struct CacheAllocation {
  int block_size = 16;       // tokens per KV block
  int num_blocks = 0;        // block ids 0..num_blocks-1
  int num_state_slots = 0;   // slot ids 0..num_state_slots-1
};

struct SeqWork {
  int64_t seq_id = 0;                    // stable while the sequence runs
  std::span<const int32_t> token_ids;    // tokens computed in this step
  int32_t start_pos = 0;                 // tokens already in the cache
  std::span<const int32_t> block_table;  // KV block ids, in position order
  int32_t state_slot = -1;               // GDN state slot id
  bool sample = false;                   // sample after the last token of this chunk
  // Set when sample is true.
  const SamplingParams* sampling = nullptr;
  std::span<const int32_t> prompt_ids;   // context for the repetition penalty
  std::span<const int32_t> output_ids;   // context for the penalties
  std::span<const int32_t> banned_token_ids;  // masked to -inf (EOS and stop ids before min_tokens)
  uint64_t seed = 0;                     // per choice: request seed (+ choice index), or drawn by the engine
  uint64_t sample_index = 0;             // tokens this choice sampled before: the RNG counter
  // Structured output: the executor asks it for the allowed tokens (while
  // the forward runs) and samples only among them. Null: unconstrained
  // (always null when num_drafts > 0).
  TokenConstraint* constraint = nullptr;
  // Speculative decoding (see the top). When num_drafts > 0, output_ids is
  // directly followed in memory by the drafts (the last num_drafts token_ids).
  int num_drafts = 0;
  int propose_drafts = 0;   // drafts wanted for the next step (sampled chunks)
  int32_t next_token = -1;  // an unsampled chunk's next token, when known (the MTP head pairs it with the last)
  // Prefix caching: when save_slot >= 0, after the step save_slot holds the
  // GDN state after positions [0, save_pos), taken inside this step's
  // forward (start_pos < save_pos < start_pos + n). save_slot is a slot no
  // sequence of the step uses and no copy of the step touches.
  int32_t save_pos = 0;
  int32_t save_slot = -1;
  // Prompt logprobs: position start_pos + j of the chunk is scored against
  // score_ids[j], the prompt token after it: its logprob and rank under the
  // raw distribution there, and the num_prompt_logprobs most likely tokens
  // (StepOutput::scored). score_ids.size() <= token_ids.size().
  std::span<const int32_t> score_ids;
  int num_prompt_logprobs = 0;
};

struct StepInput {
  std::vector<SeqWork> seqs;
  std::vector<std::pair<int32_t, int32_t>> kv_block_copies;   // (src, dst) block ids, before the forward
  std::vector<std::pair<int32_t, int32_t>> state_slot_copies; // (src, dst) slot ids, before the forward
  // Sequences that finished or were preempted since the previous step: drop
  // anything kept per seq_id (a preempted sequence comes back with a new seq_id).
  std::vector<int64_t> finished_seq_ids;
};

struct SampledToken {
  int32_t token = -1;  // -1: the row's mask and bans left no token (its request fails, no other)
  float logprob = 0.0f;                                  // of the sampled token, raw distribution
  std::vector<std::pair<int32_t, float>> top_logprobs;   // when sampling->logprobs > 0, best first
};

struct StepOutput {
  // One entry per SeqWork with sample == true, in the order of StepInput::seqs:
  // the last token the step emits for it.
  std::vector<SampledToken> sampled;
  // Speculative decoding, parallel to `sampled` (empty without it): the
  // accepted drafts, emitted before sampled[i], and the drafts proposed for
  // the next step.
  std::vector<std::vector<SampledToken>> accepted;
  std::vector<std::vector<int32_t>> drafts;
  // One entry per SeqWork with score_ids, in the order of StepInput::seqs:
  // a TokenLogprob (with its rank) per scored position.
  std::vector<std::vector<TokenLogprob>> scored;
};

// Where execute() spends its wall time in generation steps (every sequence
// computes only its last token and its drafts; steps with prompt tokens are
// left out), summed over the steps so far: the target step (planning, the
// forward, sampling, draft acceptance) and, with speculative decoding, the
// MTP passes that propose the next drafts. Each part ends with the host
// waiting for the device, so the split is the device's as well.
struct ExecutorTimes {
  int64_t steps = 0;
  double target_s = 0;
  double draft_s = 0;
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  virtual CacheLayout cache_layout() const = 0;
  virtual int vocab_size() const = 0;
  // Bytes the cache may use (device memory left after weights and peak
  // activations under gpu_memory_utilization, or the CPU budget); the engine
  // decides how to split it into blocks and slots (EngineConfig::
  // kv_cache_memory_bytes replaces it when set). The engine always calls it
  // once: a device executor profiles a step here so that its activation
  // memory reaches its peak before the cache takes the rest.
  virtual size_t cache_memory_budget() = 0;
  // Called once before the first step. Throws kUnsupported for a block size
  // the attention kernels cannot use, kOutOfMemory when allocation fails.
  virtual void allocate_cache(const CacheAllocation& allocation) = 0;

  virtual StepOutput execute(const StepInput& input) = 0;

  // Device graphs the executor keeps recorded for replay (0 without them).
  // Each holds host and device memory until the cache is reallocated, so the
  // process's memory grows with this count until every step shape is seen.
  virtual int64_t recorded_graphs() const { return 0; }
  // Safe to call from another thread (the numbers are atomics); exact once
  // no step runs.
  virtual ExecutorTimes times() const { return {}; }
};

}  // namespace hyllm
