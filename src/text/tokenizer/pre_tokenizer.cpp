#include "text/tokenizer/pre_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "text/tokenizer/json_util.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/scratch.h"
#include "text/tokenizer/utf8.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const nlohmann::json& j) {
  if (!j.is_string()) fail(ErrorCode::kCorruptData, "tokenizer.json: split behavior is not a string");
  const auto s = j.get<std::string>();
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  fail(ErrorCode::kCorruptData, "tokenizer.json: unknown split behavior {:?}", s);
}

struct Span {
  size_t start, end;
  bool is_match;
};

// NormalizedString::split of HF tokenizers: turns the (match, gap) spans that
// cover a piece into the kept sub-pieces.
void apply_behavior(std::string_view piece, const std::vector<Span>& spans, Behavior behavior,
                    std::vector<std::string_view>& out) {
  struct Keep {
    size_t start, end;
    bool remove;
  };
  std::vector<Keep> keeps;
  keeps.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      for (const auto& s : spans) keeps.push_back({s.start, s.end, false});
      break;
    case Behavior::kRemoved:
      for (const auto& s : spans) keeps.push_back({s.start, s.end, s.is_match});
      break;
    case Behavior::kContiguous:
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !keeps.empty()) {
          keeps.back().end = s.end;
        } else {
          keeps.push_back({s.start, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !keeps.empty()) {
          keeps.back().end = s.end;
        } else {
          keeps.push_back({s.start, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext: {
      for (size_t k = spans.size(); k-- > 0;) {
        const auto& s = spans[k];
        if (s.is_match && !previous_match && !keeps.empty()) {
          keeps.back().start = s.start;
        } else {
          keeps.push_back({s.start, s.end, false});
        }
        previous_match = s.is_match;
      }
      std::reverse(keeps.begin(), keeps.end());
      break;
    }
  }
  for (const auto& k : keeps) {
    if (!k.remove && k.end > k.start) out.push_back(piece.substr(k.start, k.end - k.start));
  }
}

// Splits every piece with spans_of(piece, spans) then the behavior.
template <typename SpansOf>
void split_all(std::vector<std::string_view>& pieces, Behavior behavior, SpansOf&& spans_of) {
  std::vector<std::string_view> out;
  out.reserve(pieces.size() * 2);
  std::vector<Span> spans;
  for (std::string_view piece : pieces) {
    spans.clear();
    spans_of(piece, spans);
    apply_behavior(piece, spans, behavior, out);
  }
  pieces.swap(out);
}

// Isolated splitting by a regex, the hot path of byte-level tokenizers: every
// match and every gap becomes a piece (match flags do not matter).
void split_isolated(const Regex& re, std::vector<std::string_view>& pieces) {
  thread_local std::vector<std::string_view> out;
  out.clear();
  for (std::string_view piece : pieces) {
    size_t prev = 0;
    re.for_each_match(piece, [&](size_t s, size_t e) {
      if (prev != s) out.push_back(piece.substr(prev, s - prev));
      if (e != s) out.push_back(piece.substr(s, e - s));
      prev = e;
    });
    if (prev != piece.size()) out.push_back(piece.substr(prev));
  }
  pieces.swap(out);
  out.clear();
  release_if_oversized(out);
}

// Spans of regex matches and the gaps between them (Pattern for &SysRegex).
void regex_spans(const Regex& re, bool invert, std::string_view piece, std::vector<Span>& spans) {
  if (piece.empty()) {
    spans.push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  re.for_each_match(piece, [&](size_t s, size_t e) {
    if (prev != s) spans.push_back({prev, s, invert});
    spans.push_back({s, e, !invert});
    prev = e;
  });
  if (prev != piece.size()) spans.push_back({prev, piece.size(), invert});
}

// Spans of single code points that satisfy pred, and the gaps between them.
template <typename Pred>
void char_spans(Pred&& pred, std::string_view piece, std::vector<Span>& spans) {
  if (piece.empty()) {
    spans.push_back({0, 0, false});
    return;
  }
  size_t last = 0, i = 0;
  while (i < piece.size()) {
    const size_t b = i;
    const char32_t c = next_code_point(piece, i);
    if (pred(c)) {
      if (last < b) spans.push_back({last, b, false});
      spans.push_back({b, i, true});
      last = i;
    }
  }
  if (last < piece.size()) spans.push_back({last, piece.size(), false});
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex re, Behavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  void split(std::vector<std::string_view>& pieces, PieceArena&) const override {
    if (behavior_ == Behavior::kIsolated) {
      split_isolated(re_, pieces);
      return;
    }
    split_all(pieces, behavior_, [&](std::string_view p, std::vector<Span>& spans) {
      regex_spans(re_, invert_, p, spans);
    });
  }

 private:
  Regex re_;
  Behavior behavior_;
  bool invert_;
};

const Regex& gpt2_regex() {
  static const Regex re = Regex::from_oniguruma(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  return re;
}

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void split(std::vector<std::string_view>& pieces, PieceArena& arena) const override {
    if (add_prefix_space_) {
      for (auto& p : pieces) {
        if (p.empty() || p.front() != ' ') {
          arena.push_back(" " + std::string(p));
          p = arena.back();
        }
      }
    }
    if (use_regex_) split_isolated(gpt2_regex(), pieces);
  }
  bool is_byte_level() const override { return true; }

 private:
  bool add_prefix_space_, use_regex_;
};

template <typename Pred>
class CharPreTokenizer final : public PreTokenizer {
 public:
  CharPreTokenizer(Pred pred, Behavior behavior) : pred_(pred), behavior_(behavior) {}
  void split(std::vector<std::string_view>& pieces, PieceArena&) const override {
    split_all(pieces, behavior_, [&](std::string_view p, std::vector<Span>& spans) {
      char_spans(pred_, p, spans);
    });
  }

 private:
  Pred pred_;
  Behavior behavior_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> make_char_pre_tokenizer(Pred pred, Behavior behavior) {
  return std::make_unique<CharPreTokenizer<Pred>>(pred, behavior);
}

class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  void split(std::vector<std::string_view>& pieces, PieceArena&) const override {
    static const Regex re = Regex::from_oniguruma(R"(\w+|[^\w\s]+)");
    split_all(pieces, Behavior::kRemoved, [&](std::string_view p, std::vector<Span>& spans) {
      regex_spans(re, true, p, spans);
    });
  }
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void split(std::vector<std::string_view>& pieces, PieceArena& arena) const override {
    for (const auto& p : parts_) p->split(pieces, arena);
  }
  bool is_byte_level() const override {
    for (const auto& p : parts_) {
      if (p->is_byte_level()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, "pre_tokenizer");
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(parse_pattern(json_field(j, "pattern", "Split")),
                                               parse_behavior(json_field(j, "behavior", "Split")),
                                               json_bool(j, "invert", false));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(json_bool(j, "add_prefix_space", true),
                                                   json_bool(j, "use_regex", true));
  }
  if (type == "Digits") {
    const bool individual = json_bool(j, "individual_digits", false);
    return make_char_pre_tokenizer(is_numeric, individual ? Behavior::kIsolated : Behavior::kContiguous);
  }
  if (type == "Punctuation") {
    auto it = j.find("behavior");
    const Behavior b = it == j.end() || it->is_null() ? Behavior::kIsolated : parse_behavior(*it);
    return make_char_pre_tokenizer(is_punctuation, b);
  }
  if (type == "WhitespaceSplit") {
    return make_char_pre_tokenizer(is_unicode_white_space, Behavior::kRemoved);
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "Sequence") {
    const auto& list = json_field(j, "pretokenizers", "Sequence pre_tokenizer");
    if (!list.is_array()) fail(ErrorCode::kCorruptData, "tokenizer.json: Sequence pretokenizers is not a list");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const auto& item : list) {
      auto p = parse_pre_tokenizer(item);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  fail(ErrorCode::kUnsupported, "tokenizer.json: pre_tokenizer type {:?} is not supported", type);
}

}  // namespace hyllm::tokenizer_detail
