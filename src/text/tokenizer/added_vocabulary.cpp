#include "text/tokenizer/added_vocabulary.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include "text/tokenizer/utf8.h"

namespace hyllm::tokenizer_detail {
namespace {

// Rust regex \w (Unicode Word): letters, marks, decimal digits, connector
// punctuation, letter numbers and the joiners.
bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t start;
  return is_word_char(previous_code_point(s, s.size(), start));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return is_word_char(next_code_point(s, i));
}

// Start of the white space run that ends s.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start;
    if (!is_unicode_white_space(previous_code_point(s, end, start))) break;
    end = start;
  }
  return end;
}

// Length of the white space run that starts s.
size_t leading_space_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_unicode_white_space(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedTokenMatcher::build(const std::vector<AddedToken>& tokens,
                              std::vector<std::pair<std::string, size_t>> patterns) {
  tokens_ = &tokens;
  patterns_.clear();
  for (auto& [text, index] : patterns) {
    if (!text.empty()) patterns_.push_back({std::move(text), &tokens[index]});
  }
  // Grouped by first byte, longest first, so the first hit at a position is
  // the leftmost-longest match.
  std::stable_sort(patterns_.begin(), patterns_.end(), [](const Pattern& a, const Pattern& b) {
    const auto fa = static_cast<unsigned char>(a.text[0]), fb = static_cast<unsigned char>(b.text[0]);
    if (fa != fb) return fa < fb;
    return a.text.size() > b.text.size();
  });
  first_byte_begin_.assign(257, 0);
  for (const auto& p : patterns_) ++first_byte_begin_[static_cast<unsigned char>(p.text[0]) + 1];
  for (size_t b = 1; b <= 256; ++b) first_byte_begin_[b] += first_byte_begin_[b - 1];
}

void AddedTokenMatcher::split(std::string_view text, bool skip_special, std::vector<Segment>& out) const {
  if (patterns_.empty()) {
    if (!text.empty()) out.push_back({0, text.size(), -1});
    return;
  }
  // With a single possible first byte (typical: every token starts with
  // '<'), memchr finds candidate positions.
  int only_first = -1;
  for (int b = 0; b < 256; ++b) {
    if (first_byte_begin_[b + 1] != first_byte_begin_[b]) {
      only_first = only_first == -1 ? b : -2;
    }
  }
  size_t emitted = 0;  // end of what has been assigned to segments
  size_t pos = 0;
  const size_t n = text.size();
  while (pos < n) {
    if (only_first >= 0) {
      const void* hit = std::memchr(text.data() + pos, only_first, n - pos);
      if (!hit) break;
      pos = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
    }
    const auto b = static_cast<unsigned char>(text[pos]);
    const Pattern* match = nullptr;
    for (uint32_t k = first_byte_begin_[b]; k < first_byte_begin_[b + 1]; ++k) {
      const Pattern& p = patterns_[k];
      if (p.text.size() <= n - pos && std::memcmp(text.data() + pos, p.text.data(), p.text.size()) == 0) {
        match = &p;
        break;
      }
    }
    if (!match) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + match->text.size();
    pos = stop;
    const AddedToken& token = *match->token;
    if (skip_special && token.special) continue;
    if (token.single_word) {
      const bool space_before = start == 0 || !ends_with_word(text.substr(0, start));
      const bool space_after = stop == n || !starts_with_word(text.substr(stop));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), emitted);
    if (token.rstrip) {
      stop += leading_space_length(text.substr(stop));
      pos = stop;
    }
    if (emitted < start) out.push_back({emitted, start, -1});
    out.push_back({start, stop, token.id});
    emitted = stop;
  }
  if (emitted < n) out.push_back({emitted, n, -1});
}

}  // namespace hyllm::tokenizer_detail
