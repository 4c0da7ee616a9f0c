#pragma once
// Hash maps the tokenizer's hot paths use.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hyllm::tokenizer_detail {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// string -> id, looked up by string_view without building a string.
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Open-addressing map from a pair of token ids to a packed value. Written by
// hand because merge lookups dominate BPE time and std::unordered_map's node
// per entry costs a cache miss each; no Debian-packaged flat map is in use.
class PairMap {
 public:
  static constexpr uint64_t kMissing = ~0ull;

  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    keys_.assign(cap, kEmpty);
    values_.assign(cap, 0);
    mask_ = cap - 1;
    size_ = 0;
  }

  void insert_or_assign(uint64_t k, uint64_t v) {
    if ((size_ + 1) * 2 > keys_.size()) grow();
    size_t i = slot(k);
    while (keys_[i] != kEmpty && keys_[i] != k) i = (i + 1) & mask_;
    if (keys_[i] == kEmpty) ++size_;
    keys_[i] = k;
    values_[i] = v;
  }

  uint64_t find(uint64_t k) const {
    if (keys_.empty()) return kMissing;
    size_t i = slot(k);
    while (true) {
      const uint64_t stored = keys_[i];
      if (stored == k) return values_[i];
      if (stored == kEmpty) return kMissing;
      i = (i + 1) & mask_;
    }
  }

  size_t size() const { return size_; }

 private:
  // Ids are non-negative int32, so a key never has all bits set.
  static constexpr uint64_t kEmpty = ~0ull;

  size_t slot(uint64_t k) const {
    k ^= k >> 29;
    k *= 0xBF58476D1CE4E5B9ull;
    k ^= k >> 32;
    return static_cast<size_t>(k) & mask_;
  }

  void grow() {
    std::vector<uint64_t> old_keys = std::move(keys_), old_values = std::move(values_);
    reserve(old_keys.empty() ? 8 : old_keys.size());
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmpty) insert_or_assign(old_keys[i], old_values[i]);
    }
  }

  std::vector<uint64_t> keys_, values_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace hyllm::tokenizer_detail
