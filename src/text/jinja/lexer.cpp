#include "text/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "text/jinja/utf8.h"

namespace hyllm::jinja {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// jinja2: newlines are normalised and a single trailing newline is dropped.
std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (c == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += c;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : src_(std::move(source)), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t start = find_tag_start(pos);
      if (start == std::string::npos) {
        emit(TokenType::kData, src_.substr(pos), pos);
        break;
      }
      char kind = src_[start + 1];
      size_t after = start + 2;
      char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      if (sign) ++after;
      std::string text = src_.substr(pos, start - pos);
      size_t raw_body = kind == '%' ? match_raw_begin(after) : std::string::npos;
      apply_lstrip(text, sign, kind != '{', line_starting);
      if (!text.empty()) emit(TokenType::kData, std::move(text), pos);

      if (raw_body != std::string::npos) {
        pos = lex_raw(raw_body, line_starting);
      } else if (kind == '#') {
        pos = skip_comment(start, after, line_starting);
      } else {
        pos = lex_tag(start, after, kind == '%', line_starting);
      }
    }
    tokens_.push_back(Token{TokenType::kEnd, {}, pos_of(src_.size())});
    return std::move(tokens_);
  }

 private:
  SourcePos pos_of(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return SourcePos{static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void fail_at(size_t offset, const std::string& message) const {
    TemplateError e(ErrorCode::kCorruptData, message);
    e.set_pos(pos_of(offset));
    throw e;
  }

  void emit(TokenType type, std::string text, size_t offset) {
    tokens_.push_back(Token{type, std::move(text), pos_of(offset)});
  }

  size_t find_tag_start(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  // Whitespace control for the text before a tag: `-` strips all trailing
  // whitespace; otherwise lstrip_blocks strips spaces before a block or
  // comment tag that starts its line.
  void apply_lstrip(std::string& text, char sign, bool block_or_comment, bool line_starting) const {
    if (sign == '-') {
      size_t end = text.size();
      while (end > 0 && is_ws(text[end - 1])) --end;
      text.resize(end);
      return;
    }
    if (sign == '+' || !opt_.lstrip_blocks || !block_or_comment) return;
    size_t nl = text.rfind('\n');
    size_t line_start = nl == std::string::npos ? 0 : nl + 1;
    if (line_start == 0 && !line_starting) return;
    if (line_start == text.size()) return;
    for (size_t i = line_start; i < text.size(); ++i)
      if (!is_ws(text[i])) return;
    text.resize(line_start);
  }

  // After "{%" (and sign): if this is "raw %}" returns the offset after it.
  size_t match_raw_begin(size_t p) const {
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p += 3;
    if (p < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[p])) || src_[p] == '_'))
      return std::string::npos;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      while (p < src_.size() && is_ws(src_[p])) ++p;
      return p;
    }
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  size_t lex_raw(size_t body, bool& line_starting) {
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t p = i + 2;
      char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign) ++p;
      while (p < src_.size() && is_ws(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && is_ws(src_[p])) ++p;
      size_t end = finish_block_end(p);
      if (end == std::string::npos) continue;
      std::string text = src_.substr(body, i - body);
      apply_lstrip(text, sign, true, false);
      if (!text.empty()) emit(TokenType::kData, std::move(text), body);
      line_starting = end > 0 && src_[end - 1] == '\n';
      return end;
    }
    fail_at(body, "missing end of raw directive");
  }

  // At p expects a block end ("+%}", "-%}" or "%}"); returns the offset after
  // it and the whitespace it swallows, or npos.
  size_t finish_block_end(size_t p) const {
    if (src_.compare(p, 3, "+%}") == 0) return p + 3;
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      while (p < src_.size() && is_ws(src_[p])) ++p;
      return p;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
      if (opt_.trim_blocks && p < src_.size() && src_[p] == '\n') ++p;
      return p;
    }
    return std::string::npos;
  }

  size_t skip_comment(size_t start, size_t after, bool& line_starting) {
    size_t e = src_.find("#}", after);
    if (e == std::string::npos) fail_at(start, "missing end of comment tag");
    size_t end = e + 2;
    char before = e > after ? src_[e - 1] : 0;
    if (before == '-') {
      while (end < src_.size() && is_ws(src_[end])) ++end;
    } else if (before != '+' && opt_.trim_blocks && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_starting = src_[end - 1] == '\n';
    return end;
  }

  size_t lex_tag(size_t start, size_t p, bool block, bool& line_starting) {
    emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin, block ? "{%" : "{{", start);
    std::vector<char> balance;
    while (true) {
      while (p < src_.size() && is_ws(src_[p])) ++p;
      if (p >= src_.size())
        fail_at(start, block ? "unexpected end of template, the block tag is not closed with '%}'"
                             : "unexpected end of template, the print tag is not closed with '}}'");
      if (balance.empty()) {
        if (block) {
          size_t end = finish_block_end(p);
          if (end != std::string::npos) {
            emit(TokenType::kBlockEnd, "%}", p);
            line_starting = src_[end - 1] == '\n';
            return end;
          }
        } else {
          size_t end = std::string::npos;
          if (src_.compare(p, 3, "-}}") == 0) {
            end = p + 3;
            while (end < src_.size() && is_ws(src_[end])) ++end;
          } else if (src_.compare(p, 2, "}}") == 0) {
            end = p + 2;
          }
          if (end != std::string::npos) {
            emit(TokenType::kVarEnd, "}}", p);
            line_starting = src_[end - 1] == '\n';
            return end;
          }
        }
      }
      p = lex_token(p, balance);
    }
  }

  size_t lex_token(size_t p, std::vector<char>& balance) {
    char c = src_[p];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = p;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      emit(TokenType::kName, src_.substr(p, e - p), p);
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(p);
    if (c == '\'' || c == '"') return lex_string(p);
    static const char* kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kOps2) {
      if (src_.compare(p, 2, op) == 0) {
        emit(TokenType::kOperator, op, p);
        return p + 2;
      }
    }
    static const std::string kOps1 = "+-/*%~[](){}<>=.:|,;";
    if (kOps1.find(c) == std::string::npos) fail_at(p, fmt::format("unexpected char '{}'", describe_char(p)));
    if (c == '(' || c == '[' || c == '{') {
      if (balance.size() >= 256) fail_at(p, "brackets nest too deeply");
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail_at(p, fmt::format("unexpected '{}'", c));
      if (balance.back() != c)
        fail_at(p, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
      balance.pop_back();
    }
    emit(TokenType::kOperator, std::string(1, c), p);
    return p + 1;
  }

  std::string describe_char(size_t p) const {
    size_t i = p;
    char32_t cp = utf8::next(src_, i);
    std::string s;
    utf8::append(s, cp);
    return s;
  }

  static bool digit_run(const std::string& s, size_t& e) {
    // (\d+_)*\d+
    size_t start = e;
    while (e < s.size()) {
      if (std::isdigit(static_cast<unsigned char>(s[e]))) {
        ++e;
      } else if (s[e] == '_' && e > start && e + 1 < s.size() &&
                 std::isdigit(static_cast<unsigned char>(s[e + 1]))) {
        ++e;
      } else {
        break;
      }
    }
    return e > start;
  }

  size_t lex_number(size_t p) {
    auto strip = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    // Prefixed integers: 0x.., 0o.., 0b..
    if (src_[p] == '0' && p + 1 < src_.size()) {
      char k = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      int base = k == 'x' ? 16 : k == 'o' ? 8 : k == 'b' ? 2 : 0;
      if (base) {
        size_t e = p + 2;
        while (e < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        std::string digits = strip(src_.substr(p + 2, e - p - 2));
        if (!digits.empty()) {
          errno = 0;
          char* endp = nullptr;
          unsigned long long v = std::strtoull(digits.c_str(), &endp, base);
          if (*endp || errno || v > static_cast<unsigned long long>(INT64_MAX))
            fail_at(p, "integer literal out of range");
          emit(TokenType::kInteger, std::to_string(v), p);
          return e;
        }
      }
    }
    size_t e = p;
    digit_run(src_, e);
    bool is_float = false;
    bool after_dot = p > 0 && src_[p - 1] == '.';
    if (!after_dot) {
      size_t f = e;
      if (f + 1 < src_.size() && src_[f] == '.' && std::isdigit(static_cast<unsigned char>(src_[f + 1]))) {
        ++f;
        digit_run(src_, f);
        is_float = true;
        e = f;
      }
      if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
        size_t g = e + 1;
        if (g < src_.size() && (src_[g] == '+' || src_[g] == '-')) ++g;
        if (digit_run(src_, g)) {
          is_float = true;
          e = g;
        }
      }
    }
    emit(is_float ? TokenType::kFloat : TokenType::kInteger, strip(src_.substr(p, e - p)), p);
    return e;
  }

  size_t lex_string(size_t p) {
    char quote = src_[p];
    std::string out;
    size_t i = p + 1;
    while (true) {
      if (i >= src_.size()) fail_at(p, "unexpected end of string");
      char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) fail_at(p, "unexpected end of string");
      i = decode_escape(i, out);
    }
    emit(TokenType::kString, std::move(out), p);
    return i + 1;
  }

  // Python "unicode-escape" decoding of one escape at src_[i] == '\\'.
  size_t decode_escape(size_t i, std::string& out) {
    char e = src_[i + 1];
    auto hex = [&](size_t at, int n) -> long {
      if (at + n > src_.size()) fail_at(i, "truncated escape in string literal");
      long v = 0;
      for (int k = 0; k < n; ++k) {
        char h = src_[at + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) fail_at(i, "truncated escape in string literal");
        v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
      }
      return v;
    };
    switch (e) {
      case '\n': return i + 2;
      case '\\': out += '\\'; return i + 2;
      case '\'': out += '\''; return i + 2;
      case '"': out += '"'; return i + 2;
      case 'a': out += '\a'; return i + 2;
      case 'b': out += '\b'; return i + 2;
      case 'f': out += '\f'; return i + 2;
      case 'n': out += '\n'; return i + 2;
      case 'r': out += '\r'; return i + 2;
      case 't': out += '\t'; return i + 2;
      case 'v': out += '\v'; return i + 2;
      case 'x': utf8::append(out, static_cast<char32_t>(hex(i + 2, 2))); return i + 4;
      case 'u': utf8::append(out, static_cast<char32_t>(hex(i + 2, 4))); return i + 6;
      case 'U': {
        long v = hex(i + 2, 8);
        if (v > 0x10FFFF) fail_at(i, "illegal Unicode character in string literal");
        utf8::append(out, static_cast<char32_t>(v));
        return i + 10;
      }
      default: break;
    }
    if (e >= '0' && e <= '7') {
      int v = 0;
      size_t k = i + 1;
      for (int n = 0; n < 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++n, ++k)
        v = v * 8 + (src_[k] - '0');
      utf8::append(out, static_cast<char32_t>(v));
      return k;
    }
    // Unknown escapes keep their backslash, as in Python.
    out += '\\';
    return i + 1;
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(normalize_source(source), options).run();
}

}  // namespace hyllm::jinja
