#include "text/tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/utf8.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {

std::string byte_level_token_bytes(std::string_view token) {
  std::string bytes;
  if (!byte_level_to_bytes(token, bytes)) return std::string(token);
  return bytes;
}

namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) bytes += byte_level_token_bytes(t);
    std::string text;
    append_utf8_lossy(text, bytes);
    tokens.assign(1, std::move(text));
  }
  bool is_byte_level() const override { return true; }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex regex, std::string content) : regex_(std::move(regex)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = regex_.replace_all(t, content_);
  }

 private:
  Regex regex_;
  std::string content_;
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
      size_t i = 0;
      while (i < t.size()) {
        const size_t at = i;
        chars.push_back({at, next_code_point(t, i)});
      }
      size_t start_cut = 0;
      for (size_t k = 0; k < start_ && k < chars.size() && chars[k].second == content_; ++k) start_cut = k + 1;
      size_t stop_cut = chars.size();
      for (size_t k = 0; k < stop_ && k < chars.size(); ++k) {
        const size_t index = chars.size() - k - 1;
        if (chars[index].second != content_) break;
        stop_cut = index;
      }
      if (stop_cut <= start_cut) {
        t.clear();
        continue;
      }
      const size_t b0 = chars[start_cut].first;
      const size_t b1 = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(b0, b1 - b0);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (find_invalid_utf8(pending) == std::string_view::npos) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        byte = hex_byte(t[3], t[4]);
      }
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }
  bool has_byte_fallback() const override { return true; }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }
  bool is_byte_level() const override {
    if (parts_.empty()) return false;
    for (const auto& p : parts_) {
      if (!p->is_byte_level()) return false;
    }
    return true;
  }
  bool has_byte_fallback() const override {
    for (const auto& p : parts_) {
      if (p->has_byte_fallback()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(parse_pattern(json_field(j, "pattern", "Replace decoder")),
                                            json_string(j, "content", "Replace decoder"));
  }
  if (type == "Strip") {
    const std::string content = json_string(j, "content", "Strip decoder");
    size_t i = 0;
    if (content.empty() || find_invalid_utf8(content) != std::string_view::npos) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: Strip decoder content is not one character");
    }
    const char32_t c = next_code_point(content, i);
    auto count = [&](const char* key) {
      const auto& v = json_field(j, key, "Strip decoder");
      if (!v.is_number_unsigned()) fail(ErrorCode::kCorruptData, "tokenizer.json: Strip decoder {} is not a count", key);
      return v.get<size_t>();
    };
    return std::make_unique<StripDecoder>(c, count("start"), count("stop"));
  }
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Sequence") {
    const auto& list = json_field(j, "decoders", "Sequence decoder");
    if (!list.is_array()) fail(ErrorCode::kCorruptData, "tokenizer.json: Sequence decoders is not a list");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& item : list) {
      auto p = parse_decoder(item);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  fail(ErrorCode::kUnsupported, "tokenizer.json: decoder type {:?} is not supported", type);
}

}  // namespace hyllm::tokenizer_detail
