#pragma once
// The paged-KV block pool: ids 0..num_blocks-1 with reference counts and a
// free list. A block is shared (ref > 1) when n > 1 choices fork from one
// prompt; the scheduler copies a shared block before anyone writes into it.
// Pure host bookkeeping: the executor owns the memory.

#include <cstdint>
#include <vector>

namespace hyllm {

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(ref_counts_.size()); }
  int num_free() const { return static_cast<int>(free_.size()); }
  int num_used() const { return num_blocks() - num_free(); }
  // Fraction of blocks in use, 0..1 (vllm:kv_cache_usage_perc).
  double usage() const;

  // A free block with ref count 1, or -1 when none is free.
  int32_t allocate();
  // One more holder of an allocated block.
  void add_ref(int32_t block);
  // One holder fewer; the block is free again at zero. Releasing a free block
  // is a bug and throws kInternal.
  void release(int32_t block);
  int ref_count(int32_t block) const;

 private:
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

// GDN state slots: one per running sequence, no sharing (a fork copies).
class StateSlotPool {
 public:
  explicit StateSlotPool(int num_slots);

  int num_slots() const { return static_cast<int>(in_use_.size()); }
  int num_free() const { return static_cast<int>(free_.size()); }
  int num_used() const { return num_slots() - num_free(); }
  double usage() const;

  // A free slot, or -1 when none is free.
  int32_t allocate();
  // Freeing a free slot is a bug and throws kInternal.
  void release(int32_t slot);

 private:
  std::vector<bool> in_use_;
  std::vector<int32_t> free_;
};

}  // namespace hyllm
