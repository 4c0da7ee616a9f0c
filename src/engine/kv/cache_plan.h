#pragma once
// How the cache budget is split into paged-KV blocks and GDN state slots.
//
// Policy: every running sequence holds one state slot, so up to max_num_seqs
// slots are wanted; but a slot of a large model costs as much KV as thousands
// of tokens, so slots may take at most half the budget and the rest becomes
// KV blocks. If that leaves too few blocks for one max_model_len sequence,
// slots shrink to make room; when even one slot and one full-length sequence
// do not fit, planning fails with vLLM's message. The scheduler admits a
// sequence only when a slot is free, so fewer slots than max_num_seqs lowers
// the concurrency, which the startup log states.
//
// With prefix caching the slots also hold the GDN state snapshots of cached
// prefixes: up to 2 x max_num_seqs slots are wanted (a running sequence needs
// one; the rest, and every slot no running sequence holds, keep snapshots),
// under the same half-of-the-budget cap, so snapshots never take KV memory
// from a cap that binds and never stop a sequence from running (a live slot
// evicts the least recently used snapshot).

#include <cstddef>
#include <cstdint>
#include <optional>

namespace hyllm {

struct CachePlanInput {
  size_t budget_bytes = 0;
  size_t kv_bytes_per_token = 0;     // 0 for a model without attention layers
  size_t bytes_per_state_slot = 0;   // 0 for a model without GDN layers
  int block_size = 16;
  int max_num_seqs = 1;
  int max_model_len = 1;
  bool enable_prefix_caching = false;
  // Exactly this many blocks (reserved ones included, as vLLM counts its
  // null block); slots take what the budget leaves, up to max_num_seqs.
  std::optional<int> num_blocks_override;
  // The executor's own blocks and slots (CacheLayout): allocated, never
  // counted in the pools or the capacities the plan reports.
  int reserved_blocks = 0;
  int reserved_state_slots = 0;
};

struct CachePlan {
  int block_size = 16;
  int num_blocks = 0;        // the engine's pool: ids 0..num_blocks-1
  int num_state_slots = 0;   // the engine's pool: ids 0..num_state_slots-1
  int reserved_blocks = 0;   // allocated after the pool (CachePlanInput)
  int reserved_state_slots = 0;
  int64_t kv_capacity_tokens = 0;    // num_blocks * block_size
  double max_concurrency = 0.0;      // full-length sequences that fit at once
  size_t kv_bytes = 0;       // reserved blocks and slots included
  size_t state_bytes = 0;
};

// Throws Error(kInvalidArgument) when one max_model_len sequence cannot fit.
CachePlan plan_cache(const CachePlanInput& in);

// Logs "Available KV cache memory", "KV cache size: N tokens",
// "Maximum concurrency for L tokens per request: X.XXx" and the slot count.
void log_cache_plan(const CachePlan& plan, const CachePlanInput& in);

}  // namespace hyllm
