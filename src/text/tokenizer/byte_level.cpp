#include "text/tokenizer/byte_level.h"

#include <array>

#include "text/tokenizer/utf8.h"

namespace hyllm::tokenizer_detail {
namespace {

struct Alphabet {
  std::array<std::string, 256> chars;
  std::array<int16_t, 512> byte_of;  // code point (all < 512) -> byte, -1 if none

  Alphabet() {
    byte_of.fill(-1);
    int next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      // Printable Latin-1 bytes keep their own code point; the rest are
      // shifted to 256.. in byte order (bytes_to_unicode() in GPT-2).
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const int cp = printable ? b : next_extra++;
      append_utf8(chars[b], static_cast<char32_t>(cp));
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

const std::string& byte_level_char(unsigned char b) { return alphabet().chars[b]; }

bool byte_level_to_bytes(std::string_view text, std::string& out) {
  const Alphabet& a = alphabet();
  const size_t mark = out.size();
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    // Printable ASCII maps to itself: the common case of vocabulary strings.
    if (b >= '!' && b <= '~') {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const char32_t cp = next_code_point(text, i);
    if (cp >= a.byte_of.size() || a.byte_of[cp] < 0) {
      out.resize(mark);
      return false;
    }
    out.push_back(static_cast<char>(a.byte_of[cp]));
  }
  return true;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += byte_level_char(b);
  return out;
}

}  // namespace hyllm::tokenizer_detail
