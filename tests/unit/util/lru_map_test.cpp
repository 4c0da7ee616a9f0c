// LruMap: bounded, evicts the least recently used entry and hands it back.

#include "util/lru_map.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hyllm {
namespace {

TEST(LruMap, FindsWhatWasInserted) {
  LruMap<int, std::string> m(3);
  EXPECT_EQ(m.find(1), nullptr);
  EXPECT_FALSE(m.insert(1, "one"));
  EXPECT_FALSE(m.insert(2, "two"));
  ASSERT_NE(m.find(1), nullptr);
  EXPECT_EQ(*m.find(1), "one");
  EXPECT_EQ(m.front(), "one");  // found last
  *m.find(2) = "TWO";
  EXPECT_EQ(*m.find(2), "TWO");
  EXPECT_EQ(m.size(), 2u);
  EXPECT_THROW(m.insert(2, "again"), std::logic_error);
  EXPECT_THROW((LruMap<int, int>(0)), std::invalid_argument);
}

TEST(LruMap, EvictsTheLeastRecentlyUsed) {
  LruMap<int, int> m(3);
  m.insert(1, 10);
  m.insert(2, 20);
  m.insert(3, 30);
  m.find(1);  // 2 is now the least recently used
  auto evicted = m.insert(4, 40);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(evicted->first, 2);
  EXPECT_EQ(evicted->second, 20);
  EXPECT_EQ(m.find(2), nullptr);
  EXPECT_EQ(m.front(), 40);
  std::vector<int> order;
  m.for_each([&](int k, int) { order.push_back(k); });
  EXPECT_EQ(order, (std::vector<int>{4, 1, 3}));
  evicted = m.insert(5, 50);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(evicted->first, 3);
}

// A stream of keys never seen again (a new prefill token count every step)
// keeps the map at its capacity while a key used all along stays.
TEST(LruMap, StaysBoundedUnderEndlessNewKeys) {
  LruMap<long, long> m(64);
  m.insert(-1, 0);
  int evictions = 0;
  for (long k = 0; k < 10000; ++k) {
    ASSERT_NE(m.find(-1), nullptr) << k;
    if (m.find(k) == nullptr && m.insert(k, k * 2)) ++evictions;
    ASSERT_LE(m.size(), 64u);
  }
  EXPECT_EQ(m.size(), 64u);
  EXPECT_EQ(evictions, 10000 - 63);
  EXPECT_EQ(*m.find(9999), 19998);
}

}  // namespace
}  // namespace hyllm
