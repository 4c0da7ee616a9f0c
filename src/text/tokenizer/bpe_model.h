#pragma once
// tokenizer.json "model" of type BPE: vocabulary, ranked merges, and the
// merge loop of HF tokenizers (lowest rank first, leftmost on ties).
//
// For byte-level tokenizers the model works on raw bytes: vocabulary strings
// in GPT-2's alphabet are converted once at load, so words need no mapping.

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/tokenizer/json_reader.h"
#include "text/tokenizer/string_map.h"
#include "text/tokenizer/word_cache.h"

namespace hyllm::tokenizer_detail {

class BpeModel {
 public:
  // Throws kUnsupported for other model types and options, kCorruptData for
  // malformed vocabularies and merges.
  // model: the "model" object (its vocab and merges already taken out into
  // parts by read_tokenizer_json); the vocabulary is moved out of parts.
  BpeModel(const nlohmann::json& model, TokenizerJson& parts, bool byte_level);
  ~BpeModel();

  // Appends the ids of pre-tokenized words (bytes when byte-level).
  void encode_words(std::span<const std::string_view> words, std::vector<int32_t>& out) const;

  // One more than the largest vocabulary id.
  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.id_limit()); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocabulary string, or nullopt for an id the vocabulary lacks.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  bool byte_level() const { return byte_level_; }
  size_t merge_count() const { return merges_.size(); }

 private:
  // A word the cache missed: its ids are out[offset, offset + count).
  struct CacheMiss {
    std::string_view word;
    uint64_t hash;
    size_t offset, count;
  };
  // Looks the word up in cache_ (the caller holds cache_mutex_ shared); a
  // miss is computed, appended, and noted in misses.
  void encode_word(std::string_view word, std::vector<int32_t>& out, std::vector<CacheMiss>& misses) const;
  void merge_symbols(std::vector<int32_t>& symbols) const;
  void merge_symbols_long(std::vector<int32_t>& symbols) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;

  bool byte_level_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  std::optional<int32_t> unk_id_;
  StringTable vocab_;                      // vocabulary string <-> id
  StringTable symbols_;                    // raw bytes <-> id (byte-level only)
  int32_t byte_ids_[256];                  // byte -> id of its one-byte token, or -1
  PairMap merges_;                         // (left, right) -> rank << 32 | merged id
  // One memo per model, shared by every thread, as in HF tokenizers: a
  // server tokenizes on each of its many connection threads, so a cache per
  // thread would multiply its memory by their number.
  mutable std::shared_mutex cache_mutex_;
  mutable WordCache cache_;
};

}  // namespace hyllm::tokenizer_detail
