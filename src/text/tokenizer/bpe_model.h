#pragma once
// tokenizer.json "model" of type BPE: vocabulary, ranked merges, and the
// merge loop of HF tokenizers (lowest rank first, leftmost on ties).
//
// For byte-level tokenizers the model works on raw bytes: vocabulary strings
// in GPT-2's alphabet are converted once at load, so words need no mapping.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/tokenizer/string_map.h"

namespace hyllm::tokenizer_detail {

class BpeModel {
 public:
  // Throws kUnsupported for other model types and options, kCorruptData for
  // malformed vocabularies and merges.
  BpeModel(const nlohmann::json& model, bool byte_level);
  ~BpeModel();

  // Appends the ids of one pre-tokenized word (bytes when byte-level).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // One more than the largest vocabulary id.
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocabulary string, or nullptr for an id the vocabulary lacks.
  const std::string* id_to_token(int32_t id) const;
  bool byte_level() const { return byte_level_; }
  size_t merge_count() const { return merges_.size(); }

 private:
  struct Cache;
  void merge_symbols(std::vector<int32_t>& symbols) const;
  void merge_symbols_long(std::vector<int32_t>& symbols) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;
  Cache& thread_cache() const;

  bool byte_level_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  std::optional<int32_t> unk_id_;
  std::vector<std::string> tokens_;        // id -> vocabulary string
  std::vector<uint8_t> present_;           // id -> whether tokens_[id] is real
  StringIdMap token_ids_;                  // vocabulary string -> id
  StringIdMap symbol_ids_;                 // raw bytes -> id (byte-level only)
  int32_t byte_ids_[256];                  // byte -> id of its one-byte token, or -1
  PairMap merges_;                         // (left, right) -> rank << 32 | merged id
  uint64_t instance_id_;                   // keys the per-thread caches
};

}  // namespace hyllm::tokenizer_detail
