#include "engine/kv/block_pool.h"

#include <gtest/gtest.h>

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
  EXPECT_THROW(pool.add_ref(b), Error);
  EXPECT_THROW(pool.release(7), Error);
  EXPECT_EQ(pool.allocate(), b) << "the most recently freed block is reused first";
  pool.release(a);
  pool.release(b);
  pool.release(c);
  EXPECT_EQ(pool.num_used(), 0);
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

}  // namespace
}  // namespace hyllm
