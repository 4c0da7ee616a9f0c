#pragma once
// The paged-KV block pool: ids 0..num_blocks-1 with reference counts and an
// LRU queue of free blocks. A block is shared (ref > 1) when n > 1 choices
// fork from one prompt or when requests hit the same cached prefix; the
// scheduler copies a shared partially filled block before anyone writes
// into it, and never writes into a cached block.
//
// Prefix caching: a block whose tokens are all computed may be cached under
// its BlockHash (block_hash.h). A cached block stays cached after its last
// holder releases it: it joins the back of the free queue with its contents
// intact, a later request with the same prefix takes it back (add_ref), and
// allocate() reuses free blocks from the front, least recently released
// first, forgetting the prefix of a cached one (eviction; the on_evict hook
// hears of it). Pure host bookkeeping: the executor owns the memory.

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv/block_hash.h"

namespace hyllm {

class BlockPool {
 public:
  explicit BlockPool(int num_blocks, int block_size = 16);

  int num_blocks() const { return static_cast<int>(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  // Free blocks, cached or not: what allocate() can hand out.
  int num_free() const { return num_free_; }
  int num_used() const { return num_blocks() - num_free(); }
  int num_cached() const { return static_cast<int>(by_hash_.size()); }
  // Fraction of blocks in use, 0..1 (vllm:kv_cache_usage_perc; cached free blocks count as free).
  double usage() const;

  // The least recently released free block with ref count 1, or -1 when none
  // is free. A cached block loses its hash (on_evict is called with it).
  int32_t allocate();
  // One more holder of a block; a free cached block leaves the free queue.
  void add_ref(int32_t block);
  // One holder fewer; at zero the block joins the back of the free queue.
  // Releasing a free block is a bug and throws kInternal.
  void release(int32_t block);
  int ref_count(int32_t block) const;

  // Caches an allocated block under `hash`, remembering its tokens. False
  // (and nothing changes) when the hash is cached already or the block is.
  bool cache(int32_t block, const BlockHash& hash, std::span<const int32_t> tokens);
  // The cached block under `hash` whose tokens equal `tokens`, or -1.
  int32_t lookup(const BlockHash& hash, std::span<const int32_t> tokens) const;
  // The cached block under `hash`, whatever its tokens, or -1.
  int32_t find(const BlockHash& hash) const;
  bool is_cached(int32_t block) const { return hashed_[check(block)]; }
  // Forgets a block's hash; a free block moves to the front of the queue.
  void uncache(int32_t block);
  // Forgets every hash (reset_prefix_cache); on_evict is not called.
  void uncache_all();
  // Called with the hash of every cached block allocate() reuses.
  void set_on_evict(std::function<void(const BlockHash&)> hook) { on_evict_ = std::move(hook); }

 private:
  size_t check(int32_t block) const;
  void unlink(int32_t block);
  void push_back(int32_t block);
  void push_front(int32_t block);

  int block_size_;
  std::vector<int32_t> ref_counts_;
  // The free queue: a doubly linked list over block ids with a sentinel at
  // index num_blocks; front = next_[sentinel] is reused first.
  std::vector<int32_t> prev_, next_;
  int num_free_ = 0;
  std::vector<char> hashed_;
  std::vector<BlockHash> hash_of_;
  std::vector<int32_t> tokens_;       // block_size per block: the tokens of a cached block
  std::vector<int32_t> num_tokens_;   // how many of them
  std::unordered_map<BlockHash, int32_t, BlockHashKey> by_hash_;
  std::function<void(const BlockHash&)> on_evict_;
};

}  // namespace hyllm
