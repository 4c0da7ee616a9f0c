#include "engine/kv/kv_cache_manager.h"

#include "util/status.h"

namespace hyllm {

KvCacheManager::KvCacheManager(int num_blocks, int block_size, int num_state_slots, bool enable_prefix_caching)
    : block_size_(block_size), caching_(enable_prefix_caching), blocks_(num_blocks, block_size),
      slots_(num_state_slots) {
  blocks_.set_on_evict([this](const BlockHash& h) { on_block_evicted(h); });
  slots_.set_on_drop([this](const Snapshot& s) { on_snapshot_dropped(s); });
}

void KvCacheManager::on_block_evicted(const BlockHash& hash) {
  // A snapshot whose last block is gone can never be hit again.
  if (const int32_t slot = slots_.find(hash); slot >= 0) slots_.drop(slot);
}

void KvCacheManager::on_snapshot_dropped(const Snapshot& s) {
  // A tail block is reachable only through its snapshot: reuse it first.
  if (s.tail_tokens == 0) return;
  if (const int32_t b = blocks_.find(s.key); b >= 0) blocks_.uncache(b);
}

const BlockHash& KvCacheManager::parent_of(int full_blocks, const BlockHashChain& chain) const {
  return full_blocks == 0 ? chain.root : chain.hashes[static_cast<size_t>(full_blocks - 1)];
}

PrefixHit KvCacheManager::find(std::span<const int32_t> tokens, int max_tokens, BlockHashChain& chain) {
  PrefixHit hit;
  if (!caching_ || max_tokens <= 0) return hit;
  const int bs = block_size_;
  const auto span_of = [&](int from, int to) {
    return tokens.subspan(static_cast<size_t>(from), static_cast<size_t>(to - from));
  };
  const int max_full = max_tokens / bs;
  extend_block_hashes(tokens, bs, max_full, chain);
  std::vector<int32_t> cached;
  while (static_cast<int>(cached.size()) < max_full) {
    const int i = static_cast<int>(cached.size());
    const int32_t b = blocks_.lookup(chain.hashes[static_cast<size_t>(i)], span_of(i * bs, (i + 1) * bs));
    if (b < 0) break;
    cached.push_back(b);
  }
  const int m = static_cast<int>(cached.size());
  hit.cached_block_tokens = m * bs;
  // Candidates from the longest down: a tail after block j ends inside block
  // j, after the snapshot at the end of block j and before the one at j + 1.
  for (int j = m; j >= 0; --j) {
    const BlockHash& parent = parent_of(j, chain);
    int best = -1;
    int32_t best_slot = -1, best_tail = -1;
    for (int32_t slot : slots_.tails_after(parent)) {
      const Snapshot& s = slots_.snapshot(slot);
      if (s.num_tokens > max_tokens || s.num_tokens <= best) continue;
      const auto tail = span_of(j * bs, s.num_tokens);
      if (hash_block(parent, tail) != s.key) continue;
      const int32_t tail_block = blocks_.lookup(s.key, tail);
      if (tail_block < 0) continue;
      best = s.num_tokens;
      best_slot = slot;
      best_tail = tail_block;
    }
    if (best < 0 && j > 0) {
      best_slot = slots_.find(chain.hashes[static_cast<size_t>(j - 1)]);
      if (best_slot >= 0) best = j * bs;
    }
    if (best > 0) {
      hit.num_tokens = best;
      hit.blocks.assign(cached.begin(), cached.begin() + j);
      hit.snapshot_slot = best_slot;
      hit.tail_block = best_tail;
      return hit;
    }
  }
  return hit;
}

void KvCacheManager::cache_full_blocks(std::span<const int32_t> tokens, std::span<const int32_t> block_table,
                                       int first_block, int last_block, BlockHashChain& chain) {
  if (!caching_ || last_block <= first_block) return;
  const int bs = block_size_;
  extend_block_hashes(tokens, bs, last_block, chain);
  for (int i = first_block; i < last_block; ++i) {
    blocks_.cache(block_table[static_cast<size_t>(i)], chain.hashes[static_cast<size_t>(i)],
                  tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs)));
  }
}

const BlockHash* KvCacheManager::new_boundary_snapshot_key(std::span<const int32_t> tokens, int num_tokens,
                                                          BlockHashChain& chain) {
  const int bs = block_size_;
  if (!caching_ || num_tokens <= 0 || num_tokens % bs != 0) return nullptr;
  const int full = num_tokens / bs;
  extend_block_hashes(tokens, bs, full, chain);
  const BlockHash& key = chain.hashes[static_cast<size_t>(full - 1)];
  if (const int32_t existing = slots_.find(key); existing >= 0) {
    slots_.touch(existing);
    return nullptr;
  }
  return &key;
}

int32_t KvCacheManager::save_snapshot(std::span<const int32_t> tokens, int num_tokens, BlockHashChain& chain) {
  const BlockHash* key = new_boundary_snapshot_key(tokens, num_tokens, chain);
  if (key == nullptr) return -1;
  if (blocks_.find(*key) < 0) return -1;  // the prefix's KV is not cached: a snapshot could never hit
  return slots_.allocate_snapshot({*key, parent_of(num_tokens / block_size_ - 1, chain), num_tokens, 0});
}

int32_t KvCacheManager::reserve_snapshot(std::span<const int32_t> tokens, int num_tokens,
                                         BlockHashChain& chain) {
  return new_boundary_snapshot_key(tokens, num_tokens, chain) != nullptr ? slots_.allocate() : -1;
}

bool KvCacheManager::keep_state(std::span<const int32_t> tokens, int num_tokens, int32_t live_slot,
                                int32_t tail_block, BlockHashChain& chain) {
  const int bs = block_size_;
  if (!caching_ || num_tokens <= 0) return false;
  const int full = num_tokens / bs;
  const int tail = num_tokens % bs;
  extend_block_hashes(tokens, bs, full, chain);
  // The blocks before it must be cached, or the snapshot could never hit.
  if (full > 0 && blocks_.find(chain.hashes[static_cast<size_t>(full - 1)]) < 0) return false;
  Snapshot s;
  s.num_tokens = num_tokens;
  s.tail_tokens = tail;
  const auto tail_tokens = tokens.subspan(static_cast<size_t>(full * bs), static_cast<size_t>(tail));
  if (tail == 0) {
    s.parent = parent_of(full - 1, chain);
    s.key = chain.hashes[static_cast<size_t>(full - 1)];
  } else {
    s.parent = parent_of(full, chain);
    s.key = hash_block(s.parent, tail_tokens);
  }
  if (const int32_t existing = slots_.find(s.key); existing >= 0) {
    slots_.touch(existing);
    return false;
  }
  // The tail may be cached already, in another block, from an evicted snapshot.
  if (tail > 0 && blocks_.lookup(s.key, tail_tokens) < 0) {
    HYLLM_CHECK(tail_block >= 0, "a snapshot of {} tokens needs its tail block", num_tokens);
    if (blocks_.ref_count(tail_block) != 1 || !blocks_.cache(tail_block, s.key, tail_tokens)) return false;
  }
  return slots_.keep_as_snapshot(live_slot, s);
}

void KvCacheManager::reset() {
  slots_.drop_all();
  blocks_.uncache_all();
}

}  // namespace hyllm
