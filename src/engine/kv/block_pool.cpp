#include "engine/kv/block_pool.h"

#include "util/status.h"

namespace hyllm {

BlockPool::BlockPool(int num_blocks) : ref_counts_(static_cast<size_t>(num_blocks), 0) {
  HYLLM_CHECK(num_blocks >= 0, "negative block count {}", num_blocks);
  free_.reserve(static_cast<size_t>(num_blocks));
  // Low ids on top of the stack first: allocation order is deterministic.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

double BlockPool::usage() const {
  return num_blocks() == 0 ? 0.0 : static_cast<double>(num_used()) / num_blocks();
}

int32_t BlockPool::allocate() {
  if (free_.empty()) return -1;
  int32_t b = free_.back();
  free_.pop_back();
  ref_counts_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockPool::add_ref(int32_t block) {
  HYLLM_CHECK(block >= 0 && block < num_blocks(), "block id {} out of range", block);
  HYLLM_CHECK(ref_counts_[static_cast<size_t>(block)] > 0, "add_ref on free block {}", block);
  ref_counts_[static_cast<size_t>(block)]++;
}

void BlockPool::release(int32_t block) {
  HYLLM_CHECK(block >= 0 && block < num_blocks(), "block id {} out of range", block);
  int32_t& ref = ref_counts_[static_cast<size_t>(block)];
  HYLLM_CHECK(ref > 0, "double free of block {}", block);
  if (--ref == 0) free_.push_back(block);
}

int BlockPool::ref_count(int32_t block) const {
  HYLLM_CHECK(block >= 0 && block < num_blocks(), "block id {} out of range", block);
  return ref_counts_[static_cast<size_t>(block)];
}

StateSlotPool::StateSlotPool(int num_slots) : in_use_(static_cast<size_t>(num_slots), false) {
  HYLLM_CHECK(num_slots >= 0, "negative slot count {}", num_slots);
  for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

double StateSlotPool::usage() const {
  return num_slots() == 0 ? 0.0 : static_cast<double>(num_used()) / num_slots();
}

int32_t StateSlotPool::allocate() {
  if (free_.empty()) return -1;
  int32_t s = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(s)] = true;
  return s;
}

void StateSlotPool::release(int32_t slot) {
  HYLLM_CHECK(slot >= 0 && slot < num_slots(), "state slot {} out of range", slot);
  HYLLM_CHECK(in_use_[static_cast<size_t>(slot)], "double free of state slot {}", slot);
  in_use_[static_cast<size_t>(slot)] = false;
  free_.push_back(slot);
}

}  // namespace hyllm
