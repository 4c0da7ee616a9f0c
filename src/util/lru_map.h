#pragma once
// A map of at most `capacity` entries that forgets the least recently used
// one to make room: for caches keyed by values a server sees without bound
// (token counts, shapes), whose memory must stop growing after warm-up.
//
//   LruMap<int, Plan> plans(256);
//   if (Plan* p = plans.find(k)) return *p;              // now the most recent
//   if (auto old = plans.insert(k, make_plan(k))) destroy(old->second);
//
// find() and insert() cost O(log n). Pointers from find() stay valid until
// that entry is evicted or the map destroyed. Not thread-safe.

#include <cstddef>
#include <iterator>
#include <list>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

namespace hyllm {

template <typename Key, typename Value>
class LruMap {
 public:
  explicit LruMap(size_t capacity) : capacity_(capacity) {
    if (capacity == 0) throw std::invalid_argument("LruMap of capacity 0");
  }

  // The entry of key, made the most recently used; nullptr when absent.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Adds key as the most recently used entry (key must be absent) and returns
  // the entry evicted to stay within capacity, whose resources the caller frees.
  std::optional<std::pair<Key, Value>> insert(const Key& key, Value value) {
    if (index_.count(key)) throw std::logic_error("LruMap::insert of a present key");
    std::optional<std::pair<Key, Value>> evicted;
    if (order_.size() == capacity_) {
      auto last = std::prev(order_.end());
      index_.erase(last->first);
      evicted.emplace(std::move(*last));
      order_.erase(last);
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    return evicted;
  }

  // The most recently used entry (the one just found or inserted); the map must not be empty.
  Value& front() { return order_.front().second; }
  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }
  // Every entry, most recently used first.
  template <typename F>
  void for_each(F&& f) {
    for (auto& [key, value] : order_) f(key, value);
  }

 private:
  using Order = std::list<std::pair<Key, Value>>;
  size_t capacity_;
  Order order_;  // most recently used first
  std::map<Key, typename Order::iterator> index_;
};

}  // namespace hyllm
