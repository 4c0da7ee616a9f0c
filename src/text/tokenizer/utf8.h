#pragma once
// UTF-8 helpers shared by the tokenizer stages.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hyllm::tokenizer_detail {

// Length of the well-formed UTF-8 sequence starting at s[i] (1..4), or 0 when
// the bytes there are not a well-formed sequence (Unicode Table 3-7).
size_t utf8_sequence_length(std::string_view s, size_t i);

// Offset of the first byte that is not part of well-formed UTF-8, or npos.
size_t find_invalid_utf8(std::string_view s);

// Decodes the code point at s[i] (which must be well-formed); advances i.
inline char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  if (b0 < 0xE0) {
    char32_t c = ((b0 & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
    i += 2;
    return c;
  }
  if (b0 < 0xF0) {
    char32_t c = ((b0 & 0x0F) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3F) << 6) |
                 (static_cast<unsigned char>(s[i + 2]) & 0x3F);
    i += 3;
    return c;
  }
  char32_t c = ((b0 & 0x07) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3F) << 12) |
               ((static_cast<unsigned char>(s[i + 2]) & 0x3F) << 6) |
               (static_cast<unsigned char>(s[i + 3]) & 0x3F);
  i += 4;
  return c;
}

// Code point ending at s[end) (s well-formed); sets start to its first byte.
char32_t previous_code_point(std::string_view s, size_t end, size_t& start);

void append_utf8(std::string& out, char32_t c);

// Appends bytes to out, replacing each maximal ill-formed subpart with U+FFFD
// (the same substitution as Rust's String::from_utf8_lossy).
void append_utf8_lossy(std::string& out, std::string_view bytes);

// How many bytes at the end of s are the start of a well-formed sequence that
// is cut short (0..3): the bytes a streaming decoder must hold back.
size_t incomplete_utf8_suffix(std::string_view s);

// Unicode White_Space (what Rust's and Oniguruma's \s match).
bool is_unicode_white_space(char32_t c);

}  // namespace hyllm::tokenizer_detail
