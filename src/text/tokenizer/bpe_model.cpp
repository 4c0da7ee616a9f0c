#include "text/tokenizer/bpe_model.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/utf8.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

// Ids above this are refused: a vocabulary that large is a corrupt file, and
// the id-indexed tables would be huge.
constexpr int64_t kMaxVocabId = 16 * 1024 * 1024;
// Words at least this long are not cached (HF: MAX_LENGTH).
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kCacheCapacity = 1 << 16;
// Above this many symbols the merge loop uses a heap instead of scanning.
constexpr size_t kLinearMergeLimit = 96;

std::atomic<uint64_t> next_instance_id{1};

// A merge rule as two vocabulary strings.
std::pair<std::string, std::string> parse_merge(const nlohmann::json& m, size_t index) {
  if (m.is_string()) {
    const auto& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: merge {} ({:?}) is not two tokens separated by one space",
           index, s);
    }
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  fail(ErrorCode::kCorruptData, "tokenizer.json: merge {} is neither \"a b\" nor [a, b]", index);
}

bool is_null_or_empty_string(const nlohmann::json& model, const char* key) {
  auto it = model.find(key);
  return it == model.end() || it->is_null() || (it->is_string() && it->get_ref<const std::string&>().empty());
}

}  // namespace

struct BpeModel::Cache {
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
};

BpeModel::BpeModel(const nlohmann::json& model, bool byte_level)
    : byte_level_(byte_level), instance_id_(next_instance_id.fetch_add(1)) {
  if (!model.is_object()) fail(ErrorCode::kCorruptData, "tokenizer.json: \"model\" is not an object");
  std::string type;
  if (auto it = model.find("type"); it != model.end() && it->is_string()) {
    type = it->get<std::string>();
  } else if (model.contains("merges")) {
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

  const auto& vocab = json_field(model, "vocab", "model");
  if (!vocab.is_object()) fail(ErrorCode::kCorruptData, "tokenizer.json: model.vocab is not an object");
  int64_t max_id = -1;
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer()) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: vocab entry {:?} has no integer id", token);
    }
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id > kMaxVocabId) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: vocab id {} of {:?} is out of range", id, token);
    }
    max_id = std::max(max_id, id);
  }
  tokens_.resize(static_cast<size_t>(max_id + 1));
  present_.assign(tokens_.size(), 0);
  token_ids_.reserve(vocab.size());
  if (byte_level_) symbol_ids_.reserve(vocab.size());
  std::string bytes;
  for (const auto& [token, id_json] : vocab.items()) {
    const auto id = static_cast<int32_t>(id_json.get<int64_t>());
    tokens_[id] = token;
    present_[id] = 1;
    token_ids_.insert_or_assign(token, id);
    if (byte_level_) {
      bytes.clear();
      // Strings outside the alphabet can never equal a mapped word.
      if (byte_level_to_bytes(token, bytes)) symbol_ids_.insert_or_assign(bytes, id);
    }
  }
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = -1;
    if (byte_level_) {
      auto it = symbol_ids_.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
      if (it != symbol_ids_.end()) byte_ids_[b] = it->second;
    }
  }

  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) {
    auto found = token_ids_.find(it->get_ref<const std::string&>());
    if (found == token_ids_.end()) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: unk_token {:?} is not in the vocabulary",
           it->get<std::string>());
    }
    unk_id_ = found->second;
  }

  const auto& merges = json_field(model, "merges", "model");
  if (!merges.is_array()) fail(ErrorCode::kCorruptData, "tokenizer.json: model.merges is not a list");
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto [a, b] = parse_merge(merges[i], i);
    auto ia = token_ids_.find(a);
    auto ib = token_ids_.find(b);
    if (ia == token_ids_.end() || ib == token_ids_.end()) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: merge {} ({:?} {:?}) uses a token not in the vocabulary",
           i, a, b);
    }
    auto im = token_ids_.find(a + b);
    if (im == token_ids_.end()) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: merge {} result {:?} is not in the vocabulary", i, a + b);
    }
    merges_.insert_or_assign(PairMap::key(ia->second, ib->second),
                             (static_cast<uint64_t>(i) << 32) | static_cast<uint32_t>(im->second));
  }
}

BpeModel::~BpeModel() = default;

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = token_ids_.find(token);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[id]) return nullptr;
  return &tokens_[id];
}

BpeModel::Cache& BpeModel::thread_cache() const {
  // One cache per thread and model, as in HF tokenizers: lookups take no lock.
  thread_local std::unordered_map<uint64_t, std::unique_ptr<Cache>> caches;
  auto it = caches.find(instance_id_);
  if (it != caches.end()) return *it->second;
  if (caches.size() >= 8) caches.clear();  // drop caches of models long gone
  return *caches.emplace(instance_id_, std::make_unique<Cache>()).first->second;
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
        auto it = token_ids_.find(fmt::format("<0x{:02X}>", b));
        if (it == token_ids_.end()) break;
        fallback.push_back(it->second);
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
      auto it = token_ids_.find(unit);
      if (it != token_ids_.end()) {
        flush_unk();
        symbols.push_back(it->second);
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

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (byte_level_ && word.size() == 1 && byte_ids_[static_cast<unsigned char>(word[0])] >= 0) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  const StringIdMap& symbol_map = byte_level_ ? symbol_ids_ : token_ids_;
  if (ignore_merges_) {
    auto it = symbol_map.find(word);
    if (it != symbol_map.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  Cache* cache = nullptr;
  if (cacheable) {
    cache = &thread_cache();
    auto it = cache->words.find(word);
    if (it != cache->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  initial_symbols(word, symbols);
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cache && cache->words.size() < kCacheCapacity) cache->words.emplace(std::string(word), std::move(symbols));
}

}  // namespace hyllm::tokenizer_detail
