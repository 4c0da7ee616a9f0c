#include "text/tokenizer/bpe_model.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/scratch.h"
#include "text/tokenizer/utf8.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

// Words at least this long are not cached (HF: MAX_LENGTH).
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kCacheCapacity = 1 << 16;
// Above this many symbols the merge loop uses a heap instead of scanning.
constexpr size_t kLinearMergeLimit = 96;

bool is_null_or_empty_string(const nlohmann::json& model, const char* key) {
  auto it = model.find(key);
  return it == model.end() || it->is_null() || (it->is_string() && it->get_ref<const std::string&>().empty());
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, TokenizerJson& parts, bool byte_level)
    : byte_level_(byte_level), cache_(kCacheCapacity) {
  if (!model.is_object()) fail(ErrorCode::kCorruptData, "tokenizer.json: \"model\" is not an object");
  std::string type;
  if (auto it = model.find("type"); it != model.end() && it->is_string()) {
    type = it->get<std::string>();
  } else if (parts.has_merges) {
    type = "BPE";  // files written before models were tagged
  }
  if (type != "BPE") {
    fail(ErrorCode::kUnsupported, "tokenizer.json: model type {:?} is not supported (only BPE)",
         type.empty() ? std::string("(none)") : type);
  }
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) {
      fail(ErrorCode::kUnsupported, "tokenizer.json: BPE dropout is not supported");
    }
  }
  if (!is_null_or_empty_string(model, "continuing_subword_prefix") ||
      !is_null_or_empty_string(model, "end_of_word_suffix")) {
    fail(ErrorCode::kUnsupported,
         "tokenizer.json: BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  ignore_merges_ = json_bool(model, "ignore_merges", false);
  byte_fallback_ = json_bool(model, "byte_fallback", false);
  fuse_unk_ = json_bool(model, "fuse_unk", false);
  if (!parts.has_vocab) fail(ErrorCode::kCorruptData, "tokenizer.json: model.vocab is missing or not an object");
  if (!parts.has_merges) fail(ErrorCode::kCorruptData, "tokenizer.json: model.merges is missing or not a list");
  vocab_ = std::move(parts.vocab);

  if (byte_level_) {
    std::string bytes;
    for (size_t id = 0; id < vocab_.id_limit(); ++id) {
      if (!vocab_.contains_id(static_cast<int32_t>(id))) continue;
      bytes.clear();
      // Strings outside the alphabet can never equal a mapped word.
      if (byte_level_to_bytes(vocab_.get(static_cast<int32_t>(id)), bytes)) symbols_.add(bytes, static_cast<int32_t>(id));
    }
    symbols_.build_index();
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_ids_[b] = byte_level_ ? symbols_.find(std::string_view(&c, 1)) : -1;
  }

  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) {
    const int32_t id = vocab_.find(it->get_ref<const std::string&>());
    if (id < 0) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: unk_token {:?} is not in the vocabulary",
           it->get<std::string>());
    }
    unk_id_ = id;
  }

  merges_.reserve(parts.merges.size());
  std::string joined;
  for (size_t i = 0; i < parts.merges.size(); ++i) {
    const std::string_view a = parts.merge_left(parts.merges[i]);
    const std::string_view b = parts.merge_right(parts.merges[i]);
    const int32_t ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia < 0 || ib < 0) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: merge {} ({:?} {:?}) uses a token not in the vocabulary", i, a, b);
    }
    joined.assign(a);
    joined.append(b);
    const int32_t im = vocab_.find(joined);
    if (im < 0) fail(ErrorCode::kCorruptData, "tokenizer.json: merge {} result {:?} is not in the vocabulary", i, joined);
    merges_.insert_or_assign(PairMap::key(ia, ib), (static_cast<uint64_t>(i) << 32) | static_cast<uint32_t>(im));
  }
  parts.merges = {};
  parts.merge_text = {};
}

BpeModel::~BpeModel() = default;

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const int32_t id = vocab_.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::optional<std::string_view> BpeModel::id_to_token(int32_t id) const {
  if (!vocab_.contains_id(id)) return std::nullopt;
  return vocab_.get(id);
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  // An unknown unit becomes unk (consecutive ones fused when fuse_unk), or
  // byte tokens "<0xXX>" under byte_fallback, or is dropped (HF merge_word).
  bool pending_unk = false;
  auto flush_unk = [&] {
    if (pending_unk) symbols.push_back(*unk_id_);
    pending_unk = false;
  };
  auto unknown = [&](std::string_view unit) {
    if (byte_fallback_) {
      std::vector<int32_t> fallback;
      for (unsigned char b : unit) {
        const int32_t id = vocab_.find(fmt::format("<0x{:02X}>", b));
        if (id < 0) break;
        fallback.push_back(id);
      }
      if (fallback.size() == unit.size()) {
        flush_unk();
        symbols.insert(symbols.end(), fallback.begin(), fallback.end());
        return;
      }
    }
    if (!unk_id_) return;
    if (pending_unk && !fuse_unk_) flush_unk();
    pending_unk = true;
  };
  if (byte_level_) {
    for (unsigned char b : word) {
      const int32_t id = byte_ids_[b];
      if (id >= 0) {
        flush_unk();
        symbols.push_back(id);
      } else {
        unknown(std::string_view(reinterpret_cast<const char*>(&b), 1));
      }
    }
  } else {
    size_t i = 0;
    while (i < word.size()) {
      const size_t start = i;
      next_code_point(word, i);
      const std::string_view unit = word.substr(start, i - start);
      if (const int32_t id = vocab_.find(unit); id >= 0) {
        flush_unk();
        symbols.push_back(id);
      } else {
        unknown(unit);
      }
    }
  }
  flush_unk();
}

void BpeModel::merge_symbols(std::vector<int32_t>& symbols) const {
  size_t n = symbols.size();
  if (n < 2) return;
  if (n > kLinearMergeLimit) {
    merge_symbols_long(symbols);
    return;
  }
  // ranks[i]: packed (rank, merged id) of the pair (symbols[i], symbols[i+1]);
  // kMissing sorts last, so the minimum is the next merge (leftmost on ties).
  uint64_t ranks[kLinearMergeLimit];
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = merges_.find(PairMap::key(symbols[i], symbols[i + 1]));
  while (n > 1) {
    size_t best = 0;
    uint64_t best_value = ranks[0];
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < best_value) {
        best_value = ranks[i];
        best = i;
      }
    }
    if (best_value == PairMap::kMissing) break;
    symbols[best] = static_cast<int32_t>(best_value & 0xFFFFFFFFu);
    for (size_t i = best + 1; i + 1 < n; ++i) {
      symbols[i] = symbols[i + 1];
      ranks[i] = i + 1 + 1 < n ? ranks[i + 1] : PairMap::kMissing;
    }
    --n;
    if (best + 1 < n) ranks[best] = merges_.find(PairMap::key(symbols[best], symbols[best + 1]));
    if (best > 0) ranks[best - 1] = merges_.find(PairMap::key(symbols[best - 1], symbols[best]));
  }
  symbols.resize(n);
}

void BpeModel::merge_symbols_long(std::vector<int32_t>& symbols) const {
  // HF's Word::merge_all: a heap of (rank, position) with stale entries
  // skipped; symbols form a linked list so a merge is O(log n).
  const size_t n = symbols.size();
  std::vector<int32_t> prev(n), next(n);
  std::vector<uint8_t> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Entry {
    uint64_t value;  // rank << 32 | merged id
    int32_t pos;
    bool operator>(const Entry& o) const {
      const uint64_t r = value >> 32, orank = o.value >> 32;
      return r != orank ? r > orank : pos > o.pos;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (size_t i = 0; i + 1 < n; ++i) {
    const uint64_t v = merges_.find(PairMap::key(symbols[i], symbols[i + 1]));
    if (v != PairMap::kMissing) heap.push({v, static_cast<int32_t>(i)});
  }
  while (!heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const int32_t pos = top.pos;
    if (!alive[pos] || next[pos] < 0) continue;
    const int32_t right = next[pos];
    if (merges_.find(PairMap::key(symbols[pos], symbols[right])) != top.value) continue;
    symbols[pos] = static_cast<int32_t>(top.value & 0xFFFFFFFFu);
    alive[right] = 0;
    next[pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = pos;
    if (prev[pos] >= 0) {
      const uint64_t v = merges_.find(PairMap::key(symbols[prev[pos]], symbols[pos]));
      if (v != PairMap::kMissing) heap.push({v, prev[pos]});
    }
    if (next[pos] >= 0) {
      const uint64_t v = merges_.find(PairMap::key(symbols[pos], symbols[next[pos]]));
      if (v != PairMap::kMissing) heap.push({v, pos});
    }
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) symbols[out++] = symbols[i];
  }
  symbols.resize(out);
}

void BpeModel::encode_words(std::span<const std::string_view> words, std::vector<int32_t>& out) const {
  // One shared lock for the lookups of the whole call (a lock per word would
  // cost as much as a lookup); the misses go in afterwards, under the write
  // lock when it is free at once, else they are left out (HF's cache does the
  // same: a miss costs time, never a wrong answer).
  std::vector<CacheMiss> misses;
  {
    std::shared_lock lock(cache_mutex_);
    for (std::string_view w : words) encode_word(w, out, misses);
  }
  if (misses.empty()) return;
  std::unique_lock lock(cache_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (const CacheMiss& m : misses) {
    cache_.insert(m.word, m.hash, std::span<const int32_t>(out).subspan(m.offset, m.count));
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out, std::vector<CacheMiss>& misses) const {
  if (word.empty()) return;
  if (byte_level_ && word.size() == 1 && byte_ids_[static_cast<unsigned char>(word[0])] >= 0) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    const int32_t id = (byte_level_ ? symbols_ : vocab_).find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  uint64_t hash = 0;
  if (cacheable) {
    hash = WordCache::hash(word);
    if (cache_.find(word, hash, out)) return;
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  initial_symbols(word, symbols);
  merge_symbols(symbols);
  if (cacheable) misses.push_back({word, hash, out.size(), symbols.size()});
  out.insert(out.end(), symbols.begin(), symbols.end());
  release_if_oversized(symbols);
}

}  // namespace hyllm::tokenizer_detail
