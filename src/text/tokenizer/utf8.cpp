#include "text/tokenizer/utf8.h"

namespace hyllm::tokenizer_detail {
namespace {

// Total length a lead byte announces (0: not a lead byte), and the allowed
// range of the second byte (Unicode Table 3-7, well-formed byte sequences).
struct LeadInfo {
  uint8_t length;
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo lead_info(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from s[i] form a prefix of a well-formed sequence (maximal
// subpart); equals the full length when the sequence is complete.
size_t valid_prefix_length(std::string_view s, size_t i, LeadInfo info) {
  size_t n = 1;
  while (n < info.length && i + n < s.size()) {
    const auto b = static_cast<unsigned char>(s[i + n]);
    const bool ok = n == 1 ? (b >= info.second_lo && b <= info.second_hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const LeadInfo info = lead_info(static_cast<unsigned char>(s[i]));
  if (info.length <= 1) return info.length;
  return valid_prefix_length(s, i, info) == info.length ? info.length : 0;
}

size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII runs dominate real text: skip them eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

char32_t previous_code_point(std::string_view s, size_t end, size_t& start) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  start = i;
  size_t j = i;
  return next_code_point(s, j);
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

void append_utf8_lossy(std::string& out, std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t i = 0;
  size_t run_start = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    const LeadInfo info = lead_info(b);
    const size_t valid = info.length == 0 ? 0 : valid_prefix_length(bytes, i, info);
    if (info.length != 0 && valid == info.length) {
      i += valid;
      continue;
    }
    out.append(bytes.substr(run_start, i - run_start));
    out.append(kReplacement);
    i += valid == 0 ? 1 : valid;
    run_start = i;
  }
  out.append(bytes.substr(run_start));
}

size_t incomplete_utf8_suffix(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t p = n - back;
    const auto b = static_cast<unsigned char>(s[p]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further left
    const LeadInfo info = lead_info(b);
    if (info.length <= back) return 0;  // ASCII, invalid lead, or complete
    return valid_prefix_length(s, p, info) == back ? back : 0;
  }
  return 0;
}

bool is_unicode_white_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

}  // namespace hyllm::tokenizer_detail
