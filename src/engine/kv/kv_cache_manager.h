#pragma once
// The cache the scheduler hands out: KV blocks (block_pool.h) and GDN state
// slots (state_slots.h), plus the prefix cache over both.
//
// Prefix caching on a hybrid model: attention layers need the KV of every
// prefix token, which full cached blocks give (vLLM's automatic prefix
// caching); GDN layers need their state after exactly the prefix's last
// token, one fixed-size tensor per sequence. So a prefix is a hit only when
// all its KV blocks and a snapshot of the state at its end are cached. Where
// snapshots come from (the scheduler decides when):
//  - save_snapshot(): a running sequence's state is copied into a snapshot
//    slot at a block boundary it reached at the end of a step;
//  - reserve_snapshot(), then keep_state(): a step writes a sequence's
//    state at a block boundary inside its chunk into a reserved slot, which
//    becomes the snapshot after the step;
//  - keep_state(): a sequence that finishes or is preempted leaves its live
//    slot as the snapshot at its computed length, with no copy; when that
//    length ends inside a block, the partial block is cached as the
//    snapshot's tail (a hit copies it, since the hitting request writes on).
//
// Eviction: a free cached block is reused least recently released first
// (the last blocks of a sequence go before its first ones); a snapshot
// whose last block (full or tail) is evicted goes with it, and a tail block
// whose snapshot is evicted is uncached. Snapshots are evicted least
// recently used first when a live slot or a newer snapshot needs a slot.

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/block_hash.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/state_slots.h"

namespace hyllm {

struct PrefixHit {
  int num_tokens = 0;             // tokens served from the cache (0: a miss)
  std::vector<int32_t> blocks;    // the cached full blocks of [0, num_tokens / block_size * block_size)
  int32_t snapshot_slot = -1;     // the state after num_tokens tokens
  int32_t tail_block = -1;        // a cached partial block holding the rest of the prefix, or -1
  int cached_block_tokens = 0;    // cached full blocks reach this far (>= the hit's full blocks)
};

class KvCacheManager {
 public:
  KvCacheManager(int num_blocks, int block_size, int num_state_slots, bool enable_prefix_caching);

  bool caching() const { return caching_; }
  int block_size() const { return block_size_; }
  BlockPool& blocks() { return blocks_; }
  const BlockPool& blocks() const { return blocks_; }
  StateSlotPool& slots() { return slots_; }
  const StateSlotPool& slots() const { return slots_; }

  // The longest cached prefix of `tokens` no longer than max_tokens.
  // `chain` caches the chained hashes of tokens' full blocks between calls.
  PrefixHit find(std::span<const int32_t> tokens, int max_tokens, BlockHashChain& chain);

  // Caches the full blocks of block_table[first_block, last_block), whose
  // tokens are computed. Blocks whose hash is cached already stay uncached.
  void cache_full_blocks(std::span<const int32_t> tokens, std::span<const int32_t> block_table, int first_block,
                         int last_block, BlockHashChain& chain);

  // A snapshot slot for the state after tokens[0, num_tokens), a multiple of
  // the block size whose blocks are cached: the caller copies the state in.
  // -1 when such a snapshot exists (it is marked used) or no slot is left.
  int32_t save_snapshot(std::span<const int32_t> tokens, int num_tokens, BlockHashChain& chain);

  // A live slot into which a step saves the state after tokens[0,
  // num_tokens) (a multiple of the block size) inside its forward; -1 when
  // such a snapshot exists (it is marked used) or no slot is left. Once the
  // step ran and cached the prefix's blocks, keep_state() makes it the
  // snapshot; if that fails, or the step fails, the caller releases it.
  int32_t reserve_snapshot(std::span<const int32_t> tokens, int num_tokens, BlockHashChain& chain);

  // Keeps `live_slot` (the state after tokens[0, num_tokens)) as a snapshot.
  // `tail_block` holds tokens [num_tokens / bs * bs, num_tokens) when
  // num_tokens is not a multiple of the block size; it must be held only by
  // the caller, who releases it (it stays cached). False: the slot stays live.
  bool keep_state(std::span<const int32_t> tokens, int num_tokens, int32_t live_slot, int32_t tail_block,
                  BlockHashChain& chain);

  // Forgets every cached block and snapshot.
  void reset();

 private:
  void on_block_evicted(const BlockHash& hash);
  void on_snapshot_dropped(const Snapshot& s);
  const BlockHash& parent_of(int full_blocks, const BlockHashChain& chain) const;
  // The key of a new snapshot after tokens[0, num_tokens) at a block boundary
  // (chain extended to it), or null when caching is off, num_tokens is not a
  // boundary, or that snapshot exists already (it is then marked used).
  const BlockHash* new_boundary_snapshot_key(std::span<const int32_t> tokens, int num_tokens,
                                             BlockHashChain& chain);

  int block_size_;
  bool caching_;
  BlockPool blocks_;
  StateSlotPool slots_;
};

}  // namespace hyllm
