#pragma once
// Hash maps the tokenizer's hot paths use.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <xxhash.h>

namespace hyllm::tokenizer_detail {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return XXH3_64bits(s.data(), s.size()); }
};

// string -> id, looked up by string_view without building a string.
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Strings numbered by id, stored in one arena, with a flat open-addressing
// index from string to id. Vocabularies have 150K-250K entries: one
// allocation instead of one per string, and a lookup is about one cache miss.
class StringTable {
 public:
  void reserve(size_t entries, size_t bytes) {
    arena_.reserve(bytes);
    spans_.reserve(entries);
  }

  // Adds s with the given id (ids need not be dense; a later duplicate
  // string replaces the earlier mapping, as a JSON object's last key wins).
  void add(std::string_view s, int32_t id) {
    if (static_cast<size_t>(id) >= spans_.size()) spans_.resize(static_cast<size_t>(id) + 1, Span{0, kAbsent});
    spans_[id] = Span{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(s.size())};
    arena_.append(s);
    pending_.push_back(id);
  }

  // Builds the index; call after the last add() and before find().
  void build_index() {
    size_t cap = 16;
    while (cap < pending_.size() * 2) cap <<= 1;
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
    for (int32_t id : pending_) {
      const std::string_view s = get(id);
      const uint64_t h = XXH3_64bits(s.data(), s.size());
      size_t i = h & mask_;
      while (slots_[i].id >= 0) {
        if (slots_[i].hash == static_cast<uint32_t>(h >> 32) && get(slots_[i].id) == s) break;
        i = (i + 1) & mask_;
      }
      slots_[i] = Slot{static_cast<uint32_t>(h >> 32), id};
    }
    pending_.clear();
    pending_.shrink_to_fit();
  }

  // The id of s, or -1.
  int32_t find(std::string_view s) const {
    if (slots_.empty()) return -1;
    const uint64_t h = XXH3_64bits(s.data(), s.size());
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.id < 0) return -1;
      if (slot.hash == tag && get(slot.id) == s) return slot.id;
    }
  }

  bool contains_id(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < spans_.size() && spans_[id].len != kAbsent;
  }
  // The string of an id that contains_id().
  std::string_view get(int32_t id) const {
    const Span& sp = spans_[id];
    return std::string_view(arena_.data() + sp.offset, sp.len);
  }
  // One more than the largest id.
  size_t id_limit() const { return spans_.size(); }

 private:
  static constexpr uint32_t kAbsent = ~0u;
  struct Span {
    uint32_t offset, len;
  };
  struct Slot {
    uint32_t hash;  // high half of the string's hash
    int32_t id;     // -1: empty
  };
  std::string arena_;
  std::vector<Span> spans_;
  std::vector<int32_t> pending_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

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
