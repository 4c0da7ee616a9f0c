#pragma once
// Added tokens (tokenizer.json "added_tokens"): matched in the input before
// the model runs, with HF's AddedVocabulary rules: leftmost-longest matching,
// the single_word, lstrip and rstrip flags, tokens with normalized=false
// matched in the raw text and those with normalized=true in normalized text.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer/string_map.h"

namespace hyllm::tokenizer_detail {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

// A run of the input: either an added token or text for the model.
struct Segment {
  size_t start, end;
  int32_t token_id;  // -1: plain text
};

class AddedTokenMatcher {
 public:
  // patterns: (text to look for, index into tokens).
  void build(const std::vector<AddedToken>& tokens, std::vector<std::pair<std::string, size_t>> patterns);
  bool empty() const { return patterns_.empty(); }
  // Splits text into segments; skip_special: special tokens are not matched
  // (the match is still consumed, as HF's Aho-Corasick iteration does).
  void split(std::string_view text, bool skip_special, std::vector<Segment>& out) const;

 private:
  struct Pattern {
    std::string text;
    const AddedToken* token;
  };
  const std::vector<AddedToken>* tokens_ = nullptr;
  std::vector<Pattern> patterns_;            // longest first within a first byte
  std::vector<uint32_t> first_byte_begin_;   // 257 offsets into patterns_
};

}  // namespace hyllm::tokenizer_detail
