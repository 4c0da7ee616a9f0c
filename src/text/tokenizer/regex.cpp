#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer/regex.h"

#include <pcre2.h>

#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

constexpr std::string_view kWordClassBody =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}";
constexpr std::string_view kHexClassBody = "0-9a-fA-F";

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Per-thread match state: PCRE2 match data and a JIT stack large enough for
// long whitespace or letter runs.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

std::string oniguruma_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  int class_depth = 0;
  size_t i = 0;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      const bool in_class = class_depth > 0;
      switch (e) {
        case 's': out += "\\p{White_Space}"; break;
        case 'S': out += "\\P{White_Space}"; break;
        case 'h':
          out += in_class ? std::string(kHexClassBody) : "[" + std::string(kHexClassBody) + "]";
          break;
        case 'H':
          if (in_class) fail(ErrorCode::kUnsupported, "regex: \\H inside a character class");
          out += "[^" + std::string(kHexClassBody) + "]";
          break;
        case 'w':
          out += in_class ? std::string(kWordClassBody) : "[" + std::string(kWordClassBody) + "]";
          break;
        case 'W':
          if (in_class) fail(ErrorCode::kUnsupported, "regex: \\W inside a character class");
          out += "[^" + std::string(kWordClassBody) + "]";
          break;
        case 'u':
          if (i + 6 <= p.size() && is_hex(p[i + 2]) && is_hex(p[i + 3]) &&
              is_hex(p[i + 4]) && is_hex(p[i + 5])) {
            out += "\\x{";
            out += p.substr(i + 2, 4);
            out += "}";
            i += 6;
            continue;
          }
          out += "\\u";
          break;
        default:
          out += c;
          out += e;
      }
      i += 2;
      continue;
    }
    if (c == '[') {
      // "[]" and "[^]" start a class whose first member is a literal ']'.
      ++class_depth;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']' && class_depth == 1) {
        out += "\\]";
        ++i;
      }
      continue;
    }
    if (c == ']' && class_depth > 0) {
      --class_depth;
      out += c;
      ++i;
      continue;
    }
    if (c == '(' && class_depth == 0 && i + 1 < p.size() && p[i + 1] == '?') {
      // Inline options: Ruby's m is PCRE2's s (dot matches newline).
      size_t j = i + 2;
      while (j < p.size() && (p[j] == 'i' || p[j] == 'm' || p[j] == 'x' || p[j] == '-')) ++j;
      if (j > i + 2 && j < p.size() && (p[j] == ':' || p[j] == ')')) {
        out += "(?";
        for (size_t k = i + 2; k < j; ++k) out += p[k] == 'm' ? 's' : p[k];
        i = j;
        continue;
      }
    }
    out += c;
    ++i;
  }
  return out;
}

Regex Regex::from_oniguruma(std::string_view pattern) {
  Regex r;
  r.translated_ = oniguruma_to_pcre2(pattern);
  auto compiled = std::make_shared<Compiled>();
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(r.translated_.data()),
                                 r.translated_.size(),
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NO_UTF_CHECK,
                                 &error, &offset, cc);
  pcre2_compile_context_free(cc);
  if (!compiled->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail(ErrorCode::kCorruptData, "tokenizer regex {:?} does not compile: {} (at offset {})",
         std::string(pattern), reinterpret_cast<const char*>(message), offset);
  }
  compiled->jit = pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE) == 0;
  r.compiled_ = std::move(compiled);
  return r;
}

Regex Regex::literal(std::string_view text) {
  // HF: an empty literal pattern matches nothing.
  if (text.empty()) return from_oniguruma("(?!)");
  std::string escaped;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                       (c >= 'A' && c <= 'Z') || c == '_';
    if (plain) {
      escaped += c;
    } else if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      escaped += fmt::format("\\x{{{:x}}}", u);
    } else {
      escaped += '\\';
      escaped += c;
    }
  }
  // Escaped text has nothing Oniguruma and PCRE2 read differently except
  // the escapes we emitted, which both read alike.
  return from_oniguruma(escaped);
}

bool Regex::find(std::string_view text, size_t from, size_t& start, size_t& end) const {
  MatchState& st = match_state();
  if (!st.data || !st.context) fail(ErrorCode::kOutOfMemory, "PCRE2 match state allocation failed");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = compiled_->jit
                     ? pcre2_jit_match(compiled_->code, subject, text.size(), from, 0, st.data, st.context)
                     : pcre2_match(compiled_->code, subject, text.size(), from, PCRE2_NO_UTF_CHECK,
                                   st.data, st.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    fail(ErrorCode::kResourceExhausted, "tokenizer regex match failed: {}",
         reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  start = ov[0];
  end = ov[1];
  return true;
}

size_t Regex::next_char(std::string_view text, size_t pos) {
  if (pos >= text.size()) return std::string_view::npos;
  ++pos;
  while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

std::string Regex::replace_all(std::string_view text, std::string_view replacement) const {
  std::string out;
  size_t prev = 0;
  for_each_match(text, [&](size_t s, size_t e) {
    out.append(text.substr(prev, s - prev));
    out.append(replacement);
    prev = e;
  });
  out.append(text.substr(prev));
  return out;
}

}  // namespace hyllm::tokenizer_detail
