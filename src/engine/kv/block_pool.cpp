#include "engine/kv/block_pool.h"

#include <algorithm>

#include "util/status.h"

namespace hyllm {

BlockPool::BlockPool(int num_blocks, int block_size)
    : block_size_(block_size), ref_counts_(static_cast<size_t>(std::max(num_blocks, 0)), 0) {
  HYLLM_CHECK(num_blocks >= 0, "negative block count {}", num_blocks);
  HYLLM_CHECK(block_size > 0, "block size {}", block_size);
  const size_t n = static_cast<size_t>(num_blocks);
  prev_.assign(n + 1, static_cast<int32_t>(n));
  next_.assign(n + 1, static_cast<int32_t>(n));
  hashed_.assign(n, 0);
  hash_of_.resize(n);
  num_tokens_.assign(n, 0);
  // Ascending ids from the front: allocation order is deterministic.
  for (int32_t b = 0; b < num_blocks; ++b) push_back(b);
}

size_t BlockPool::check(int32_t block) const {
  HYLLM_CHECK(block >= 0 && block < num_blocks(), "block id {} out of range", block);
  return static_cast<size_t>(block);
}

void BlockPool::unlink(int32_t b) {
  const auto i = static_cast<size_t>(b);
  next_[static_cast<size_t>(prev_[i])] = next_[i];
  prev_[static_cast<size_t>(next_[i])] = prev_[i];
  num_free_--;
}

void BlockPool::push_back(int32_t b) {
  const auto sentinel = static_cast<int32_t>(num_blocks());
  const int32_t last = prev_[static_cast<size_t>(sentinel)];
  prev_[static_cast<size_t>(b)] = last;
  next_[static_cast<size_t>(b)] = sentinel;
  next_[static_cast<size_t>(last)] = b;
  prev_[static_cast<size_t>(sentinel)] = b;
  num_free_++;
}

void BlockPool::push_front(int32_t b) {
  const auto sentinel = static_cast<int32_t>(num_blocks());
  const int32_t first = next_[static_cast<size_t>(sentinel)];
  next_[static_cast<size_t>(b)] = first;
  prev_[static_cast<size_t>(b)] = sentinel;
  prev_[static_cast<size_t>(first)] = b;
  next_[static_cast<size_t>(sentinel)] = b;
  num_free_++;
}

double BlockPool::usage() const {
  return num_blocks() == 0 ? 0.0 : static_cast<double>(num_used()) / num_blocks();
}

int32_t BlockPool::allocate() {
  if (num_free_ == 0) return -1;
  const int32_t b = next_[static_cast<size_t>(num_blocks())];
  unlink(b);
  ref_counts_[static_cast<size_t>(b)] = 1;
  if (hashed_[static_cast<size_t>(b)]) {
    const BlockHash evicted = hash_of_[static_cast<size_t>(b)];
    uncache(b);
    if (on_evict_) on_evict_(evicted);
  }
  return b;
}

void BlockPool::add_ref(int32_t block) {
  const size_t i = check(block);
  if (ref_counts_[i] == 0) {
    HYLLM_CHECK(hashed_[i], "add_ref on free block {}", block);
    unlink(block);
  }
  ref_counts_[i]++;
}

void BlockPool::release(int32_t block) {
  const size_t i = check(block);
  HYLLM_CHECK(ref_counts_[i] > 0, "double free of block {}", block);
  if (--ref_counts_[i] == 0) push_back(block);
}

int BlockPool::ref_count(int32_t block) const { return ref_counts_[check(block)]; }

bool BlockPool::cache(int32_t block, const BlockHash& hash, std::span<const int32_t> tokens) {
  const size_t i = check(block);
  HYLLM_CHECK(!tokens.empty() && tokens.size() <= static_cast<size_t>(block_size_), "caching {} tokens in a block of {}",
              tokens.size(), block_size_);
  if (hashed_[i] || by_hash_.count(hash)) return false;
  if (tokens_.empty()) tokens_.assign(ref_counts_.size() * static_cast<size_t>(block_size_), 0);
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(block_size_)));
  num_tokens_[i] = static_cast<int32_t>(tokens.size());
  hashed_[i] = 1;
  hash_of_[i] = hash;
  by_hash_.emplace(hash, block);
  return true;
}

int32_t BlockPool::lookup(const BlockHash& hash, std::span<const int32_t> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const auto i = static_cast<size_t>(it->second);
  if (static_cast<size_t>(num_tokens_[i]) != tokens.size()) return -1;
  const auto first = tokens_.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(block_size_));
  return std::equal(tokens.begin(), tokens.end(), first) ? it->second : -1;
}

int32_t BlockPool::find(const BlockHash& hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? -1 : it->second;
}

void BlockPool::uncache(int32_t block) {
  const size_t i = check(block);
  if (!hashed_[i]) return;
  by_hash_.erase(hash_of_[i]);
  hashed_[i] = 0;
  num_tokens_[i] = 0;
  // A free block that caches nothing is the first to reuse.
  if (ref_counts_[i] == 0) {
    unlink(block);
    push_front(block);
  }
}

void BlockPool::uncache_all() {
  for (int32_t b = 0; b < num_blocks(); ++b) uncache(b);
}

}  // namespace hyllm
