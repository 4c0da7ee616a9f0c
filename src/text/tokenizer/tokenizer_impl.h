#pragma once
// The state behind hyllm::Tokenizer: the parsed pipeline stages, the added
// vocabulary, and what tokenizer_config.json says.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/tokenizer/added_vocabulary.h"
#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/decoder.h"
#include "text/tokenizer/normalizer.h"
#include "text/tokenizer/post_processor.h"
#include "text/tokenizer/pre_tokenizer.h"
#include "text/tokenizer/string_map.h"

namespace hyllm::tokenizer_detail {

struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  std::optional<std::string> chat_template;                // the default one
  std::map<std::string, std::string, std::less<>> named_chat_templates;
  std::string text;                                        // the file as read
};

struct TokenizerImpl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;

  std::vector<AddedToken> added_tokens;
  StringIdMap added_ids;              // content -> id
  std::vector<int32_t> added_index;   // id -> index into added_tokens, or -1
  std::vector<std::string> added_decode_form;  // per added token: its normalized content
  AddedTokenMatcher raw_matcher;         // tokens with normalized=false
  AddedTokenMatcher normalized_matcher;  // tokens with normalized=true

  int32_t vocab_size = 0;
  std::vector<uint8_t> special;       // id -> decode skips it (skip_special_tokens)
  bool byte_level_decode = false;     // decoder is ByteLevel: use token_bytes
  std::string all_token_bytes;        // concatenated bytes of every id
  std::vector<uint32_t> token_bytes_offset;  // vocab_size + 1 offsets

  TokenizerConfig config;
  std::vector<std::string> warnings;  // settings read but not applied

  // Builds everything from the texts of tokenizer.json and tokenizer_config.json.
  void load(std::string_view tokenizer_json, std::string_view config_json);

  void encode(std::string_view text, bool add_special_tokens, bool split_special_tokens,
              std::vector<int32_t>& out) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  // HF id_to_token: the added token's (normalized) content or the vocabulary
  // string; nullptr for unknown ids.
  std::optional<std::string_view> token_string(int32_t id) const;
  std::string_view token_bytes(int32_t id) const;

 private:
  void load_added_tokens(const nlohmann::json& list);
  void load_config(std::string_view config_json);
  void build_decode_tables();
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
};

}  // namespace hyllm::tokenizer_detail
