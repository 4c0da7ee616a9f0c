#pragma once
// GDN state slots: each running sequence holds one live slot (conv and
// recurrent state, no sharing: a fork copies); with prefix caching, the
// slots no running sequence needs hold snapshots, the state after a cached
// prefix. Snapshots are evictable: a live allocation takes a free slot, else
// the least recently used snapshot's. Pure host bookkeeping.

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "engine/kv/block_hash.h"

namespace hyllm {

// The state after the prefix tokens[0, num_tokens). `key` names that prefix:
// the hash of its last block, a full block when num_tokens is a multiple of
// the block size, else the partial "tail" block [parent's end, num_tokens),
// which is cached in the block pool under the same key. `parent` is the hash
// of the last full block before the tail (the root for none).
struct Snapshot {
  BlockHash key;
  BlockHash parent;
  int num_tokens = 0;
  int tail_tokens = 0;  // num_tokens % block_size
};

class StateSlotPool {
 public:
  explicit StateSlotPool(int num_slots);

  int num_slots() const { return static_cast<int>(state_.size()); }
  int num_free() const { return num_free_; }                 // neither live nor snapshot
  int num_used() const { return num_live_; }                 // live
  int num_snapshots() const { return static_cast<int>(by_key_.size()); }
  // Slots a live allocation can get now: free ones and snapshots.
  int num_available() const { return num_free_ + num_snapshots(); }
  // Live slots / slots, 0..1.
  double usage() const;

  // A live slot: a free one, else the least recently used snapshot's
  // (on_drop hears of it); -1 when every slot is live.
  int32_t allocate();
  // A live slot is free again; releasing a slot that is not live throws kInternal.
  void release(int32_t slot);

  // A slot for a new snapshot (its holder copies the state in): a free one,
  // else the least recently used snapshot's; -1 when every slot is live or a
  // snapshot under the same key exists.
  int32_t allocate_snapshot(const Snapshot& s);
  // A live slot becomes a snapshot without a copy (its sequence is done with
  // it); false, leaving it live, when a snapshot under the same key exists.
  bool keep_as_snapshot(int32_t slot, const Snapshot& s);
  // The snapshot's slot under `key`, or -1.
  int32_t find(const BlockHash& key) const;
  // Snapshots with a tail after the full block `parent`.
  const std::vector<int32_t>& tails_after(const BlockHash& parent) const;
  const Snapshot& snapshot(int32_t slot) const;
  bool is_snapshot(int32_t slot) const;
  // Marks a snapshot most recently used.
  void touch(int32_t slot);
  // Frees a snapshot's slot (on_drop hears of it).
  void drop(int32_t slot);
  void drop_all();
  // Each snapshot's generation changes when its slot is reused or dropped.
  uint64_t generation(int32_t slot) const;
  // Called with every snapshot that leaves, before its slot is reused.
  void set_on_drop(std::function<void(const Snapshot&)> hook) { on_drop_ = std::move(hook); }

 private:
  enum class State : uint8_t { kFree, kLive, kSnapshot };
  size_t check(int32_t slot) const;
  void lru_unlink(int32_t slot);
  void lru_push_back(int32_t slot);
  int32_t take_free_or_evict();
  void register_snapshot(int32_t slot, const Snapshot& s);

  std::vector<State> state_;
  std::vector<int32_t> free_;  // a stack: low ids first
  int num_free_ = 0, num_live_ = 0;
  std::vector<Snapshot> snapshots_;
  std::vector<uint64_t> generation_;
  // Snapshot LRU: a doubly linked list with a sentinel at index num_slots.
  std::vector<int32_t> prev_, next_;
  std::unordered_map<BlockHash, int32_t, BlockHashKey> by_key_;
  std::unordered_map<BlockHash, std::vector<int32_t>, BlockHashKey> tails_;
  std::function<void(const Snapshot&)> on_drop_;
};

}  // namespace hyllm
