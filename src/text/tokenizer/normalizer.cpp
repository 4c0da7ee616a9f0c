#include "text/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "text/tokenizer/json_util.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/utf8.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

// True when every code point is NFC/NFKC quick-check Yes with combining class
// 0 and no compatibility decomposition, so all four forms leave the text
// unchanged: ASCII and Latin-1 letters below U+00A0, and CJK ideographs.
bool trivially_normalized(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    const char32_t c = next_code_point(text, i);
    if (c >= 0x4E00 && c <= 0x9FFF) continue;
    return false;
  }
  return true;
}

}  // namespace

std::string unicode_normalize(std::string_view text, NormalForm form) {
  if (trivially_normalized(text)) return std::string(text);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result,
                   static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    fail(ErrorCode::kInvalidArgument, "unicode normalization failed: {}", utf8proc_errmsg(n));
  }
  std::string out(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
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
