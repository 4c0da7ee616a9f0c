#pragma once
// Regexes of tokenizer.json files, run with PCRE2 (UTF, UCP, JIT).
//
// HF tokenizers compiles its patterns with Oniguruma (Ruby syntax), so a
// pattern is first rewritten where PCRE2 reads the same text differently:
// \s/\S become Unicode White_Space (PCRE2's UCP \s also takes U+180E), \h is a
// hex digit, \w is Unicode Word, \uHHHH is a code point, ^ and $ match at
// line breaks and (?m) means dot-all.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hyllm::tokenizer_detail {

class Regex {
 public:
  // Throws Error(kCorruptData) when the pattern does not compile.
  static Regex from_oniguruma(std::string_view pattern);
  // Matches text literally.
  static Regex literal(std::string_view text);

  // Matches in order, with Oniguruma's find_iter rule for empty matches (one
  // is skipped when it touches the end of the previous match). The text must
  // be valid UTF-8 (not re-checked). Calls on_match(start, end).
  template <typename F>
  void for_each_match(std::string_view text, F&& on_match) const {
    size_t pos = 0;
    size_t last_end = std::string_view::npos;
    while (pos <= text.size()) {
      size_t start, end;
      if (!find(text, pos, start, end)) return;
      if (start == end && last_end == end) {
        pos = next_char(text, pos);
        if (pos == std::string_view::npos) return;
        continue;
      }
      on_match(start, end);
      last_end = end;
      pos = end;
      if (start == end) {
        pos = next_char(text, pos);
        if (pos == std::string_view::npos) return;
      }
    }
  }

  // Replaces every match with replacement (no group references).
  std::string replace_all(std::string_view text, std::string_view replacement) const;

  const std::string& pcre2_pattern() const { return translated_; }

 private:
  struct Compiled;
  bool find(std::string_view text, size_t from, size_t& start, size_t& end) const;
  static size_t next_char(std::string_view text, size_t pos);

  std::shared_ptr<const Compiled> compiled_;
  std::string translated_;
};

// The Oniguruma-to-PCRE2 rewrite (exposed for tests).
std::string oniguruma_to_pcre2(std::string_view pattern);

}  // namespace hyllm::tokenizer_detail
