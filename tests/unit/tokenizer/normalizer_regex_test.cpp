#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>

#include "corpus.h"
#include "text/tokenizer/normalizer.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/utf8.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

std::string whole_text_normal_form(const std::string& s, int options) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                              &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | options));
  EXPECT_GE(n, 0);
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

// The fast path (only runs around non-inert code points go to utf8proc)
// must equal utf8proc on the whole text.
TEST(UnicodeNormalize, EqualsWholeTextUtf8proc) {
  const auto docs = testing::load_corpus();
  std::vector<std::string> texts;
  for (const auto& d : docs) texts.push_back(d.text);
  texts.push_back("e\u0301\u0323 \u1e0b\u0323 a\u0308\u0301 \u1100\u1161\u11a8 \uac00\u11a8 \u0b47\u0b3e \u0dd9\u0dcf\u0dca");
  texts.push_back("\u0301leading mark");
  const struct {
    NormalForm form;
    int options;
  } forms[] = {{NormalForm::kNfc, UTF8PROC_COMPOSE},
               {NormalForm::kNfd, UTF8PROC_DECOMPOSE},
               {NormalForm::kNfkc, UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
               {NormalForm::kNfkd, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};
  for (const auto& f : forms) {
    for (const auto& t : texts) {
      const std::string ours = unicode_normalize(t, f.form), want = whole_text_normal_form(t, f.options);
      size_t i = 0;
      while (i < ours.size() && i < want.size() && ours[i] == want[i]) ++i;
      ASSERT_EQ(ours.size(), want.size()) << "form " << static_cast<int>(f.form) << " first difference at byte " << i
                                          << ": " << ::testing::PrintToString(ours.substr(i >= 12 ? i - 12 : 0, 30))
                                          << " vs " << ::testing::PrintToString(want.substr(i >= 12 ? i - 12 : 0, 30));
      ASSERT_TRUE(ours == want) << "form " << static_cast<int>(f.form) << " first difference at byte " << i;
    }
  }
}

TEST(Utf8, LossyReplacementUsesMaximalSubparts) {
  std::string out;
  append_utf8_lossy(out, "a\xF0\x9F\x99" "b\xE0\x80\xC3\xA9\xFF\xED\xA0\x80");
  // F0 9F 99 is one maximal subpart; E0 80: E0 alone (80 is not A0..BF),
  // then 80; ED A0 80 is a surrogate: three replacements.
  EXPECT_EQ(out, "a\uFFFDb\uFFFD\uFFFD\u00e9\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(incomplete_utf8_suffix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(incomplete_utf8_suffix("ab\xF0\x9F\x99\x82"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("ab\xE0\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("\xC3"), 1u);
  EXPECT_EQ(find_invalid_utf8("ok \xC3\xA9 \xC0\xAF"), 6u);
  EXPECT_EQ(find_invalid_utf8("fine \xF4\x8F\xBF\xBF"), std::string_view::npos);
}

std::vector<std::string> matches(const Regex& re, std::string_view text) {
  std::vector<std::string> out;
  re.for_each_match(text, [&](size_t s, size_t e) { out.emplace_back(text.substr(s, e - s)); });
  return out;
}

TEST(Regex, OnigurumaSemantics) {
  // \s is Unicode White_Space: U+180E (not White_Space since Unicode 6.3)
  // is not matched although PCRE2's own \s would take it.
  const auto ws = Regex::from_oniguruma(R"(\s+)");
  EXPECT_EQ(matches(ws, "a\u00a0\u3000b\u180ec"), std::vector<std::string>({"\u00a0\u3000"}));
  // Case-insensitive contractions take the long s and uppercase.
  const auto contraction = Regex::from_oniguruma(R"((?i:'s|'ll))");
  EXPECT_EQ(matches(contraction, "it'S we'LL x'\u017f"), std::vector<std::string>({"'S", "'LL", "'\u017f"}));
  // \h is a hex digit in Ruby syntax.
  EXPECT_EQ(matches(Regex::from_oniguruma(R"(\h+)"), "zz 0fA9 \t"), std::vector<std::string>({"0fA9"}));
  // Empty matches: one per position, not right after a match.
  EXPECT_EQ(matches(Regex::from_oniguruma("a*"), "baab").size(), 3u);
  EXPECT_EQ(matches(Regex::literal("a.b"), "aab a.b"), std::vector<std::string>({"a.b"}));
  EXPECT_TRUE(matches(Regex::literal(""), "abc").empty());
  EXPECT_EQ(oniguruma_to_pcre2(R"([^\s\p{L}]\u00e9(?m:.))"), R"([^\p{White_Space}\p{L}]\x{00e9}(?s:.))");
}

TEST(Regex, BadPatternIsCorruptData) {
  try {
    (void)Regex::from_oniguruma("(unclosed");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  }
}

}  // namespace
}  // namespace hyllm::tokenizer_detail
