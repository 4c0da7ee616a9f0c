#include "text/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "text/tokenizer/json_util.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/utf8.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

int form_options(NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  return options;
}

// Appends the normal form of a piece of text, computed by utf8proc.
void append_normalized(std::string& out, std::string_view text, int options) {
  if (text.empty()) return;
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result,
                   static_cast<utf8proc_option_t>(options));
  if (n < 0) fail(ErrorCode::kInvalidArgument, "unicode normalization failed: {}", utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
}

constexpr char32_t kCodePoints = 0x110000;

// Code points a normal form leaves alone whatever surrounds them: combining
// class 0, never the second of a canonical composition, and their own normal
// form. Text between two of them normalizes independently, so only runs of
// other code points (with the inert one before each run, which marks may
// compose with) go through utf8proc; real text is mostly inert.
class InertTable {
 public:
  explicit InertTable(NormalForm form) : bits_((kCodePoints + 63) / 64, ~0ull) {
    const int options = form_options(form);
    std::vector<char32_t> seconds;
    for (char32_t c = 0; c < kCodePoints; ++c) {
      const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
      if (p->combining_class != 0) {
        clear(c);
        continue;
      }
      // Hangul syllables decompose algorithmically (no table entry).
      const bool hangul_syllable = c >= 0xAC00 && c <= 0xD7A3;
      if ((p->decomp_seqindex == UINT16_MAX && !hangul_syllable) || (c >= 0xD800 && c <= 0xDFFF)) continue;
      // Every code point after the first in a full canonical decomposition
      // may be the second of a composition.
      utf8proc_int32_t buf[32];
      int boundclass = 0;
      const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32,
                                                         UTF8PROC_DECOMPOSE, &boundclass);
      if (n > 1 && n <= 32) {
        for (utf8proc_ssize_t k = 1; k < n; ++k) seconds.push_back(static_cast<char32_t>(buf[k]));
      }
      std::string one, normalized;
      append_utf8(one, c);
      append_normalized(normalized, one, options);
      if (normalized != one) clear(c);
    }
    for (char32_t c : seconds) clear(c);
    for (char32_t c = 0x1161; c <= 0x1175; ++c) clear(c);  // Hangul vowel jamo
    for (char32_t c = 0x11A8; c <= 0x11C2; ++c) clear(c);  // Hangul trailing jamo
  }
  bool inert(char32_t c) const { return (bits_[c >> 6] >> (c & 63)) & 1; }

 private:
  void clear(char32_t c) { bits_[c >> 6] &= ~(1ull << (c & 63)); }
  std::vector<uint64_t> bits_;
};

const InertTable& inert_table(NormalForm form) {
  switch (form) {
    case NormalForm::kNfc: { static const InertTable t(form); return t; }
    case NormalForm::kNfd: { static const InertTable t(form); return t; }
    case NormalForm::kNfkc: { static const InertTable t(form); return t; }
    case NormalForm::kNfkd: { static const InertTable t(form); return t; }
  }
  fail(ErrorCode::kInternal, "unknown normal form");
}

}  // namespace

std::string unicode_normalize(std::string_view text, NormalForm form) {
  const InertTable& table = inert_table(form);
  const int options = form_options(form);
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;      // text[0, copied) is in out
  size_t last_inert = 0;  // start of the last inert code point seen
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {  // ASCII is inert in every form
      last_inert = i++;
      continue;
    }
    const size_t start = i;
    const char32_t c = next_code_point(text, i);
    if (table.inert(c)) {
      last_inert = start;
      continue;
    }
    const size_t region = std::max(copied, last_inert);
    size_t end = i;
    while (end < text.size()) {
      size_t j = end;
      const char32_t d = next_code_point(text, j);
      if (d < 0x80 || table.inert(d)) break;
      end = j;
    }
    out.append(text.substr(copied, region - copied));
    append_normalized(out, text.substr(region, end - region), options);
    copied = end;
    last_inert = end;
    i = end;
  }
  out.append(text.substr(copied));
  return out;
}

namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = unicode_normalize(text, form_); }

 private:
  NormalForm form_;
};

// Rust's char::to_lowercase per code point (HF's Lowercase): the simple
// mapping, except U+0130 whose full lowercase is "i" + U+0307.
class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
      const auto b = static_cast<unsigned char>(text[i]);
      if (b < 0x80) {
        out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
        ++i;
        continue;
      }
      const char32_t c = next_code_point(text, i);
      if (c == 0x130) {
        out += "i\xCC\x87";
        continue;
      }
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    text = std::move(out);
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t j = begin;
        if (!is_unicode_white_space(next_code_point(text, j))) break;
        begin = j;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start;
        if (!is_unicode_white_space(previous_code_point(text, end, start))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = regex_.replace_all(text, content_); }

 private:
  Regex regex_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(json_bool(j, "strip_left", false),
                                             json_bool(j, "strip_right", false));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(parse_pattern(json_field(j, "pattern", "Replace")),
                                               json_string(j, "content", "Replace"));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(json_string(j, "prepend", "Prepend"));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    const auto& list = json_field(j, "normalizers", "Sequence normalizer");
    if (!list.is_array()) fail(ErrorCode::kCorruptData, "tokenizer.json: Sequence normalizers is not a list");
    for (const auto& item : list) {
      auto p = parse_normalizer(item);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  fail(ErrorCode::kUnsupported, "tokenizer.json: normalizer type {:?} is not supported", type);
}

}  // namespace hyllm::tokenizer_detail
