#pragma once
// Reads tokenizer.json in one pass with nlohmann's SAX interface: the bulky
// model.vocab and model.merges go straight into compact tables, everything
// else becomes an ordinary JSON document. Building a DOM for a 150K-250K
// entry vocabulary and its merges would dominate load time.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tokenizer/string_map.h"

namespace hyllm::tokenizer_detail {

struct MergeRef {
  uint32_t left_offset, left_len, right_offset, right_len;  // into merge_text
};

struct TokenizerJson {
  nlohmann::json doc;           // the file without model.vocab and model.merges
  bool has_vocab = false;
  bool has_merges = false;
  StringTable vocab;            // token string -> id (index built)
  std::string merge_text;       // the merge strings, concatenated
  std::vector<MergeRef> merges; // in rank order

  std::string_view merge_left(const MergeRef& m) const { return std::string_view(merge_text).substr(m.left_offset, m.left_len); }
  std::string_view merge_right(const MergeRef& m) const { return std::string_view(merge_text).substr(m.right_offset, m.right_len); }
};

// Throws Error(kCorruptData) for malformed JSON or a malformed vocab/merges.
TokenizerJson read_tokenizer_json(std::string_view text);

}  // namespace hyllm::tokenizer_detail
