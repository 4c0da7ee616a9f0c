#include "engine/kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/kv/state_slots.h"
#include "util/status.h"

namespace hyllm {
namespace {

TEST(BlockPool, RefCountsFreeAtZeroAndRefuseDoubleFree) {
  BlockPool pool(3);
  EXPECT_EQ(pool.num_free(), 3);
  const int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_DOUBLE_EQ(pool.usage(), 1.0);
  pool.add_ref(b);
  EXPECT_EQ(pool.ref_count(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.num_free(), 0);
  pool.release(b);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_THROW(pool.release(b), Error);
  EXPECT_THROW(pool.add_ref(b), Error) << "an uncached free block has no holder to join";
  EXPECT_THROW(pool.release(7), Error);
  EXPECT_EQ(pool.allocate(), b);
  pool.release(a);
  pool.release(b);
  pool.release(c);
  EXPECT_EQ(pool.num_used(), 0);
}

TEST(BlockPool, FreeBlocksAreReusedLeastRecentlyReleasedFirst) {
  BlockPool pool(4);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(pool.allocate());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3})) << "ascending ids at first";
  for (int32_t b : {2, 0, 3, 1}) pool.release(b);
  got.clear();
  for (int i = 0; i < 4; ++i) got.push_back(pool.allocate());
  EXPECT_EQ(got, (std::vector<int32_t>{2, 0, 3, 1}));
}

TEST(BlockPool, CachedBlocksAreFoundByHashAndTokensAndEvictedInLruOrder) {
  BlockPool pool(3, 2);
  std::vector<BlockHash> evicted;
  pool.set_on_evict([&](const BlockHash& h) { evicted.push_back(h); });
  const std::vector<int32_t> t1 = {5, 6}, t2 = {7, 8};
  const BlockHash h1 = hash_block(root_block_hash(), t1), h2 = hash_block(h1, t2);
  const int32_t a = pool.allocate(), b = pool.allocate();
  EXPECT_TRUE(pool.cache(a, h1, t1));
  EXPECT_TRUE(pool.cache(b, h2, t2));
  EXPECT_FALSE(pool.cache(b, h2, t2)) << "already cached";
  const int32_t c = pool.allocate();
  EXPECT_FALSE(pool.cache(c, h1, t1)) << "a second block with a cached hash stays uncached";
  EXPECT_EQ(pool.lookup(h1, t1), a);
  EXPECT_EQ(pool.lookup(h1, t2), -1) << "the tokens must match too";
  EXPECT_EQ(pool.lookup(h2, std::vector<int32_t>{7}), -1);
  pool.release(b);  // cached, free: stays findable
  pool.release(a);
  pool.release(c);  // uncached
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.num_cached(), 2);
  EXPECT_EQ(pool.lookup(h2, t2), b);
  // A hit takes a free cached block back.
  pool.add_ref(a);
  EXPECT_EQ(pool.num_free(), 2);
  pool.release(a);  // now the most recently released
  // Least recently released first: b, then c, then a.
  EXPECT_EQ(pool.allocate(), b);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0], h2);
  EXPECT_EQ(pool.lookup(h2, t2), -1);
  EXPECT_EQ(pool.allocate(), c);
  EXPECT_EQ(evicted.size(), 1u) << "c cached nothing";
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_EQ(evicted.size(), 2u);
  EXPECT_EQ(pool.num_cached(), 0);
}

TEST(BlockPool, UncachedFreeBlocksAreReusedFirst) {
  BlockPool pool(3, 1);
  const std::vector<int32_t> t = {1};
  const int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  pool.cache(a, hash_block(root_block_hash(), t), t);
  pool.release(a);
  pool.release(b);
  pool.release(c);
  pool.uncache(a);
  EXPECT_EQ(pool.allocate(), a);
  pool.uncache_all();
  EXPECT_EQ(pool.num_cached(), 0);
}

TEST(BlockHash, ChainsCoverEveryEarlierTokenAndSeparateFullFromPartialBlocks) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6}, b = {1, 2, 3, 9, 5, 6};
  std::vector<BlockHash> ha, hb;
  extend_block_hashes(a, 3, 2, ha);
  extend_block_hashes(b, 3, 2, hb);
  ASSERT_EQ(ha.size(), 2u);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]) << "same block tokens, different prefix";
  EXPECT_EQ(ha[1], hash_block(ha[0], std::vector<int32_t>{4, 5, 6}));
  EXPECT_NE(hash_block(root_block_hash(), std::vector<int32_t>{1, 2}),
            hash_block(root_block_hash(), std::vector<int32_t>{1, 2, 0}));
  extend_block_hashes(a, 3, 1, ha);
  EXPECT_EQ(ha.size(), 2u) << "extending never shrinks";
  EXPECT_THROW(extend_block_hashes(a, 3, 3, ha), Error);
}

TEST(StateSlotPool, AllocatesEachSlotOnceAndRefusesDoubleFree) {
  StateSlotPool pool(2);
  const int32_t a = pool.allocate(), b = pool.allocate();
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.allocate(), -1);
  pool.release(a);
  EXPECT_THROW(pool.release(a), Error);
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_DOUBLE_EQ(pool.usage(), 1.0);
}

Snapshot snap(int32_t id, int tokens, int tail = 0, int32_t parent = 0) {
  Snapshot s;
  s.key = hash_block(root_block_hash(), std::vector<int32_t>{id});
  s.parent = hash_block(root_block_hash(), std::vector<int32_t>{-1 - parent});
  s.num_tokens = tokens;
  s.tail_tokens = tail;
  return s;
}

TEST(StateSlotPool, SnapshotsFillSpareSlotsAndGiveWayLeastRecentlyUsedFirst) {
  StateSlotPool pool(3);
  std::vector<int> dropped;
  pool.set_on_drop([&](const Snapshot& s) { dropped.push_back(s.num_tokens); });
  const int32_t live = pool.allocate();
  const int32_t s1 = pool.allocate_snapshot(snap(1, 16));
  const int32_t s2 = pool.allocate_snapshot(snap(2, 32, 3, 7));
  ASSERT_GE(s1, 0);
  ASSERT_GE(s2, 0);
  EXPECT_EQ(pool.allocate_snapshot(snap(1, 16)), -1) << "one snapshot per key";
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.num_available(), 2);
  EXPECT_EQ(pool.num_used(), 1);
  EXPECT_EQ(pool.find(snap(2, 32).key), s2);
  ASSERT_EQ(pool.tails_after(snap(0, 0, 0, 7).parent).size(), 1u);
  const uint64_t g1 = pool.generation(s1);
  pool.touch(s1);  // s2 is now the least recently used
  EXPECT_EQ(pool.allocate(), s2);
  EXPECT_EQ(dropped, (std::vector<int>{32}));
  EXPECT_TRUE(pool.tails_after(snap(0, 0, 0, 7).parent).empty());
  // A live slot kept as a snapshot, without a copy.
  EXPECT_TRUE(pool.keep_as_snapshot(live, snap(3, 48)));
  EXPECT_EQ(pool.num_used(), 1);
  EXPECT_FALSE(pool.keep_as_snapshot(s2, snap(3, 48))) << "a snapshot under that key exists";
  EXPECT_THROW(pool.release(live), Error) << "no longer live";
  EXPECT_EQ(pool.allocate_snapshot(snap(4, 64)), s1) << "the least recently used snapshot's slot";
  EXPECT_NE(pool.generation(s1), g1);
  pool.drop_all();
  EXPECT_EQ(pool.num_snapshots(), 0);
  pool.release(s2);
  EXPECT_EQ(pool.num_free(), 3);
}

}  // namespace
}  // namespace hyllm
