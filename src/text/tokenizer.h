#pragma once
// Tokenizer: the HF tokenizer.json pipeline for byte-level BPE models
// (normalizer, added tokens, pre-tokenizer, BPE model, post-processor, decoder),
// read from the model's own files; nothing about a vocabulary is hard-coded.
// Behaviour equals HF tokenizers (the Rust library). All methods are const and
// safe to call from several threads at once.
//
// Errors: a file that is missing throws Error(kNotFound); one that is not valid
// JSON or lacks required fields throws kCorruptData; a valid tokenizer of a kind
// hyllm does not implement (WordPiece, Unigram, ...) throws kUnsupported. Text
// that is not valid UTF-8 throws kInvalidArgument from encode().

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hyllm {

namespace tokenizer_detail {
struct TokenizerImpl;
}

class Tokenizer {
 public:
  // Reads dir/tokenizer.json and, when present, dir/tokenizer_config.json and
  // dir/chat_template.jinja (which takes precedence over the config's
  // chat_template).
  static Tokenizer from_model_dir(const std::filesystem::path& dir);
  // tokenizer_config_json may be empty (no config file).
  static Tokenizer from_json_file(const std::filesystem::path& tokenizer_json,
                                  const std::filesystem::path& tokenizer_config_json = {});
  // From the texts of the files; config may be empty.
  static Tokenizer from_json_string(std::string_view tokenizer_json,
                                    std::string_view tokenizer_config_json = {});

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special_tokens: apply the post-processor (e.g. a BOS template).
  // split_special_tokens: text that spells a special added token (special=true)
  // is tokenized as plain text instead of becoming the control token (HF's
  // split_special_tokens / encode_special_tokens; the server's option for user
  // content). Added tokens with special=false are always matched, as in HF.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true,
                              bool split_special_tokens = false) const;

  // HF decode: ids unknown to the vocabulary are dropped; invalid UTF-8 in the
  // result is replaced by U+FFFD (maximal subparts, like Rust's
  // String::from_utf8_lossy).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Model vocabulary plus added tokens: one more than the largest id.
  int32_t vocab_size() const;
  // Added tokens first, then the model vocabulary (token strings as stored in
  // tokenizer.json, e.g. "Ġthe" for byte-level vocabularies).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Empty string for an id outside the vocabulary.
  std::string id_to_token(int32_t id) const;
  // An added token marked special (skipped by skip_special_tokens).
  bool is_special(int32_t id) const;
  // Any added token (special or not).
  bool is_added(int32_t id) const;
  // The raw bytes the token contributes to a decode on its own, possibly an
  // incomplete UTF-8 sequence (for logprobs' `bytes`). Empty for unknown ids.
  std::string token_bytes(int32_t id) const;

  // From tokenizer_config.json (bos_token etc. given as a string or as an
  // AddedToken object); the id is looked up in the vocabulary.
  const std::optional<std::string>& bos_token() const;
  const std::optional<std::string>& eos_token() const;
  const std::optional<std::string>& pad_token() const;
  const std::optional<std::string>& unk_token() const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  std::optional<int32_t> unk_token_id() const;
  // tokenizer_config.json's add_bos_token / add_eos_token when given.
  std::optional<bool> add_bos_token() const;
  std::optional<bool> add_eos_token() const;

  // The default chat template: chat_template.jinja in the model dir, else
  // tokenizer_config.json's chat_template (a string, or a list of
  // {name, template} where the one named "default" is chosen). nullptr if none.
  const std::string* chat_template_source() const;
  // A named template from the list form (e.g. "tool_use"); nullptr if absent.
  const std::string* chat_template_source(std::string_view name) const;

  // Settings of the files that were read but are not applied (for example a
  // truncation or padding section); callers may log them.
  const std::vector<std::string>& load_warnings() const;

  // The parsed tokenizer_config.json text (empty when there was none), for
  // settings other parts read (model_max_length, clean_up_tokenization_spaces).
  const std::string& tokenizer_config_text() const;

  // Internal access for the detokenizer and tests.
  const tokenizer_detail::TokenizerImpl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<tokenizer_detail::TokenizerImpl> impl);
  std::unique_ptr<tokenizer_detail::TokenizerImpl> impl_;
};

}  // namespace hyllm
