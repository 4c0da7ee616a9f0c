// The prefix cache over KV blocks and GDN state snapshots: a hit needs the
// blocks and a snapshot at the prefix's end; eviction keeps the two in step.
#include "engine/kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace hyllm {
namespace {

constexpr int kBs = 4;

std::vector<int32_t> iota_tokens(int n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A sequence's blocks, computed and cached as the scheduler does it.
struct Seq {
  std::vector<int32_t> tokens, table;
  BlockHashChain hashes;
  int32_t slot = -1;
};

Seq compute(KvCacheManager& m, std::vector<int32_t> tokens, int computed) {
  Seq s;
  s.tokens = std::move(tokens);
  for (int i = 0; i < (computed + kBs - 1) / kBs; ++i) s.table.push_back(m.blocks().allocate());
  m.cache_full_blocks(s.tokens, s.table, 0, computed / kBs, s.hashes);
  s.slot = m.slots().allocate();
  return s;
}

void release(KvCacheManager& m, Seq& s) {
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) m.blocks().release(*it);
  if (s.slot >= 0) m.slots().release(s.slot);
  s.table.clear();
  s.slot = -1;
}

TEST(KvCacheManager, AHitNeedsTheBlocksAndASnapshotAtTheirEnd) {
  KvCacheManager m(16, kBs, 4, true);
  Seq a = compute(m, iota_tokens(12), 10);
  BlockHashChain hashes;
  const auto prompt = iota_tokens(20);
  PrefixHit hit = m.find(prompt, 19, hashes);
  EXPECT_EQ(hit.num_tokens, 0) << "blocks without a snapshot";
  EXPECT_EQ(hit.cached_block_tokens, 8);
  const int32_t dst = m.save_snapshot(a.tokens, 8, a.hashes);
  ASSERT_GE(dst, 0);
  EXPECT_EQ(m.save_snapshot(a.tokens, 8, a.hashes), -1) << "saved once";
  EXPECT_EQ(m.save_snapshot(a.tokens, 6, a.hashes), -1) << "only at block boundaries";
  EXPECT_EQ(m.save_snapshot(a.tokens, 12, a.hashes), -1) << "only over cached blocks";
  hit = m.find(prompt, 19, hashes);
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.snapshot_slot, dst);
  EXPECT_EQ(hit.blocks, (std::vector<int32_t>{a.table[0], a.table[1]}));
  EXPECT_EQ(hit.tail_block, -1);
  EXPECT_EQ(m.find(prompt, 7, hashes).num_tokens, 0) << "the hit stops at max_tokens";
  auto other = prompt;
  other[5] = 1;
  EXPECT_EQ(m.find(other, 19, hashes = {}).num_tokens, 0) << "a different second block";
  release(m, a);
}

// cache_salt: a salted request hits only what requests with its salt cached,
// blocks and snapshots alike; unsalted requests share the unsalted cache.
TEST(KvCacheManager, ASaltedPrefixIsHitOnlyWithTheSameSalt) {
  KvCacheManager m(16, kBs, 4, true);
  Seq a;
  a.hashes.root = salted_root_hash("tenant-a");
  a.tokens = iota_tokens(12);
  for (int i = 0; i < 2; ++i) a.table.push_back(m.blocks().allocate());
  m.cache_full_blocks(a.tokens, a.table, 0, 2, a.hashes);
  ASSERT_GE(m.save_snapshot(a.tokens, 8, a.hashes), 0);
  const auto prompt = iota_tokens(20);
  auto probe = [&](std::string_view salt) {
    BlockHashChain chain;
    if (!salt.empty()) chain.root = salted_root_hash(salt);
    return m.find(prompt, 19, chain);
  };
  EXPECT_EQ(probe("tenant-a").num_tokens, 8);
  EXPECT_EQ(probe("tenant-b").num_tokens, 0);
  EXPECT_EQ(probe("tenant-b").cached_block_tokens, 0) << "not even the blocks";
  EXPECT_EQ(probe("").cached_block_tokens, 0);
  EXPECT_NE(salted_root_hash("tenant-a"), salted_root_hash("tenant-b"));
  EXPECT_NE(salted_root_hash("x"), root_block_hash());
  release(m, a);
}

// A save inside a step: the reserved slot is live (no hit can read it)
// until keep_state() makes it the snapshot after the step.
TEST(KvCacheManager, AReservedSnapshotSlotIsHitOnlyOnceKept) {
  KvCacheManager m(16, kBs, 4, true);
  const auto prompt = iota_tokens(20);
  BlockHashChain hashes, probe;
  const int32_t slot = m.reserve_snapshot(prompt, 8, hashes);
  ASSERT_GE(slot, 0);
  EXPECT_FALSE(m.slots().is_snapshot(slot));
  EXPECT_EQ(m.reserve_snapshot(prompt, 6, hashes), -1) << "only at block boundaries";
  Seq a = compute(m, iota_tokens(12), 10);  // the step ran: its blocks are cached
  EXPECT_EQ(m.find(prompt, 19, probe).num_tokens, 0) << "reserved, not yet a snapshot";
  ASSERT_TRUE(m.keep_state(prompt, 8, slot, -1, hashes));
  const PrefixHit hit = m.find(prompt, 19, probe);
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.snapshot_slot, slot);
  EXPECT_EQ(m.reserve_snapshot(prompt, 8, hashes), -1) << "that snapshot exists";
  const int32_t second = m.reserve_snapshot(prompt, 4, hashes);
  ASSERT_GE(second, 0);
  m.slots().release(second);  // a failed step gives its reserved slot back
  release(m, a);
}

TEST(KvCacheManager, AFinishedSequenceLeavesItsStateAndTailForAnExactHit) {
  KvCacheManager m(16, kBs, 4, true);
  Seq a = compute(m, iota_tokens(11), 10);  // 10 computed: two full blocks and a tail of 2
  const int32_t slot = a.slot;
  ASSERT_TRUE(m.keep_state(a.tokens, 10, a.slot, a.table[2], a.hashes));
  a.slot = -1;
  release(m, a);
  EXPECT_EQ(m.slots().num_used(), 0);
  EXPECT_EQ(m.slots().num_snapshots(), 1);
  BlockHashChain hashes;
  auto prompt = iota_tokens(30);
  PrefixHit hit = m.find(prompt, 29, hashes);
  EXPECT_EQ(hit.num_tokens, 10);
  EXPECT_EQ(hit.snapshot_slot, slot);
  EXPECT_EQ(hit.blocks.size(), 2u);
  EXPECT_GE(hit.tail_block, 0);
  EXPECT_EQ(m.find(prompt, 9, hashes).num_tokens, 0) << "no snapshot at or below 9 tokens";
  prompt[9] = 7;  // the tail differs
  EXPECT_EQ(m.find(prompt, 29, hashes).num_tokens, 0);
  // An aligned snapshot below it is the fallback.
  Seq b = compute(m, iota_tokens(11), 8);
  ASSERT_GE(m.save_snapshot(b.tokens, 8, b.hashes), 0);
  EXPECT_EQ(m.find(prompt, 29, hashes).num_tokens, 8);
  release(m, b);
}

TEST(KvCacheManager, EvictingASnapshotsLastBlockDropsItAndDroppingATailUncachesIt) {
  KvCacheManager m(4, kBs, 2, true);
  Seq a = compute(m, iota_tokens(6), 6);  // one full block, a tail of 2
  ASSERT_TRUE(m.keep_state(a.tokens, 6, a.slot, a.table[1], a.hashes));
  a.slot = -1;
  release(m, a);  // the tail block is released first: it is the first to evict
  EXPECT_EQ(m.slots().num_snapshots(), 1);
  EXPECT_EQ(m.blocks().num_cached(), 2);
  // Two blocks that were never used go first, then the tail.
  for (int i = 0; i < 2; ++i) m.blocks().allocate();
  EXPECT_EQ(m.slots().num_snapshots(), 1);
  m.blocks().allocate();
  EXPECT_EQ(m.slots().num_snapshots(), 0) << "its tail block was evicted";
  EXPECT_EQ(m.blocks().num_cached(), 1);

  KvCacheManager n(8, kBs, 1, true);
  Seq b = compute(n, iota_tokens(6), 6);
  ASSERT_TRUE(n.keep_state(b.tokens, 6, b.slot, b.table[1], b.hashes));
  b.slot = -1;
  release(n, b);
  EXPECT_EQ(n.blocks().num_cached(), 2);
  const int32_t live = n.slots().allocate();  // the only slot: the snapshot gives way
  EXPECT_GE(live, 0);
  EXPECT_EQ(n.slots().num_snapshots(), 0);
  EXPECT_EQ(n.blocks().num_cached(), 1) << "a tail without its snapshot is uncached";
}

TEST(KvCacheManager, ResetForgetsEverythingAndCachingOffFindsNothing) {
  KvCacheManager m(16, kBs, 4, true);
  Seq a = compute(m, iota_tokens(8), 8);
  ASSERT_GE(m.save_snapshot(a.tokens, 8, a.hashes), 0);
  release(m, a);
  m.reset();
  EXPECT_EQ(m.slots().num_snapshots(), 0);
  EXPECT_EQ(m.blocks().num_cached(), 0);
  BlockHashChain hashes;
  EXPECT_EQ(m.find(iota_tokens(12), 11, hashes).cached_block_tokens, 0);

  KvCacheManager off(16, kBs, 4, false);
  Seq b = compute(off, iota_tokens(8), 8);
  EXPECT_EQ(off.save_snapshot(b.tokens, 8, b.hashes), -1);
  EXPECT_FALSE(off.keep_state(b.tokens, 8, b.slot, -1, b.hashes));
  EXPECT_EQ(off.blocks().num_cached(), 0);
  release(off, b);
}

}  // namespace
}  // namespace hyllm
