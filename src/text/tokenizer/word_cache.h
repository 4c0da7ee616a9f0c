#pragma once
// Memo of BPE results: word bytes -> ids. A flat open-addressing table with
// keys and ids in two arenas, so a lookup costs about one cache miss (a
// node-based map costs several). Once full it stops inserting, as HF
// tokenizers' cache does. Not thread-safe: BpeModel guards its one cache.

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

namespace hyllm::tokenizer_detail {

class WordCache {
 public:
  explicit WordCache(size_t max_entries) : max_entries_(max_entries) {
    size_t slots = 16;
    while (slots < max_entries * 2) slots <<= 1;
    slots_.assign(slots, Slot{});
    mask_ = slots - 1;
  }

  static uint64_t hash(std::string_view word) {
    const uint64_t h = XXH3_64bits(word.data(), word.size());
    return h == 0 ? 1 : h;  // 0 marks an empty slot
  }

  // Appends the cached ids of word to out; false when absent.
  bool find(std::string_view word, uint64_t h, std::vector<int32_t>& out) const {
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.hash == 0) return false;
      if (holds(s, word, h)) {
        out.insert(out.end(), ids_.begin() + s.ids_offset, ids_.begin() + s.ids_offset + s.ids_len);
        return true;
      }
    }
  }

  // Words longer than 65535 bytes or with as many ids are not cached; a word
  // cached already is left as it is.
  void insert(std::string_view word, uint64_t h, std::span<const int32_t> ids) {
    if (size_ >= max_entries_ || word.size() > UINT16_MAX || ids.size() > UINT16_MAX) return;
    size_t i = h & mask_;
    for (; slots_[i].hash != 0; i = (i + 1) & mask_) {
      if (holds(slots_[i], word, h)) return;
    }
    slots_[i] = Slot{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(ids_.size()),
                     static_cast<uint16_t>(word.size()), static_cast<uint16_t>(ids.size())};
    keys_.append(word);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++size_;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t ids_offset = 0;
    uint16_t key_len = 0;
    uint16_t ids_len = 0;
  };
  bool holds(const Slot& s, std::string_view word, uint64_t h) const {
    return s.hash == h && s.key_len == word.size() &&
           std::memcmp(keys_.data() + s.key_offset, word.data(), word.size()) == 0;
  }
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t max_entries_;
};

}  // namespace hyllm::tokenizer_detail
