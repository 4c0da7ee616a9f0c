#pragma once
// The boundary between the engine (what to compute) and a model runner (how).
// The engine plans a step as a list of sequence chunks; the executor runs the
// model over all of them at once (flat tokens, no padding) and samples.
//
// Invariants the engine guarantees for every SeqWork:
//  - token_ids are the sequence's tokens at positions [start_pos, start_pos + n);
//  - block_table covers positions [0, start_pos + n) of the attention KV cache;
//  - state_slot holds the GDN state after position start_pos - 1; start_pos == 0
//    means the executor must reset the slot (zero conv and recurrent state);
//  - a sequence appears at most once per step.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace hyllm {

// What one unit of cache costs, so the engine can size its pools.
struct CacheLayout {
  int block_size = 16;                // tokens per KV block
  size_t bytes_per_block = 0;         // all attention layers, K and V
  size_t bytes_per_state_slot = 0;    // all GDN layers, conv + recurrent state
  int num_attention_layers = 0;
  int num_gdn_layers = 0;
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
  std::span<const int32_t> prompt_ids;   // context for repetition penalty
  std::span<const int32_t> output_ids;   // context for the penalties
  uint64_t seed = 0;                     // request seed (or one drawn by the engine)
  uint64_t sample_index = 0;             // tokens this sequence sampled before: RNG counter
};

struct StepInput {
  std::vector<SeqWork> seqs;
};

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;                                  // of the sampled token
  std::vector<std::pair<int32_t, float>> top_logprobs;   // when sampling->logprobs > 0
};

struct StepOutput {
  // One entry per SeqWork with sample == true, in the order of StepInput::seqs.
  std::vector<SampledToken> sampled;
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  virtual CacheLayout cache_layout() const = 0;
  virtual int vocab_size() const = 0;
  // Bytes the cache may use (device memory left after weights and activations
  // under --gpu-memory-utilization, or the CPU budget); the engine decides how
  // to split it into blocks and slots.
  virtual size_t cache_memory_budget() const = 0;
  // Called once before the first step.
  virtual void allocate_cache(int num_blocks, int num_state_slots) = 0;

  virtual StepOutput execute(const StepInput& input) = 0;

  // Used when n > 1 sequences fork from one computed prompt.
  virtual void copy_state_slot(int32_t src, int32_t dst) = 0;
  virtual void copy_kv_block(int32_t src, int32_t dst) = 0;
};

}  // namespace hyllm
