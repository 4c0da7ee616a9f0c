// Conformance with HF tokenizers: ids and decodes equal the goldens that
// tools/tokenizer/hf_goldens.py computed with HF tokenizers 0.23 (and that
// agree with transformers.js on the default mode); round trips and
// streaming decode agree with full decode.

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <fmt/format.h>

#include <cstdlib>

#include "corpus.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "tokenizer_fixture.h"

namespace hyllm {
namespace {

using testing::CorpusDoc;

const std::vector<CorpusDoc>& corpus() {
  static const auto docs = testing::load_corpus();
  return docs;
}

const nlohmann::json& golden(const std::string& name) {
  static std::map<std::string, nlohmann::json> cache;
  auto& g = cache[name];
  if (g.is_null()) g = nlohmann::json::parse(testing::read_xz_file(testing::tokenizer_data_dir() + "/golden_" + name + ".json.xz"));
  return g;
}

// NFC of the whole text by utf8proc directly (text may contain NUL).
std::string nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                              &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) throw std::runtime_error("utf8proc_map failed");
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::string ids_context(const std::vector<int32_t>& ours, const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < ours.size() && i < want.size() && ours[i] == want[i]) ++i;
  std::string s = fmt::format("first difference at token {} of {} (HF {}):", i, ours.size(), want.size());
  for (size_t k = i >= 3 ? i - 3 : 0; k < i + 4; ++k) {
    s += fmt::format(" [{} {}]", k < ours.size() ? std::to_string(ours[k]) : "-",
                     k < want.size() ? std::to_string(want[k]) : "-");
  }
  return s;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, EncodeEqualsHf) {
  const Tokenizer& tok = testing::test_tokenizer(GetParam());
  const auto& g = golden(GetParam());
  ASSERT_EQ(tok.vocab_size(), g.at("vocab_size").get<int32_t>());
  size_t checked = 0, failed = 0;
  for (const auto& c : g.at("cases")) {
    const auto& doc = corpus().at(c.at("doc").get<size_t>());
    const bool add = c.at("add_special").get<bool>(), split = c.at("split_special").get<bool>();
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    const auto ours = tok.encode(doc.text, add, split);
    ++checked;
    if (ours != want && ++failed <= 10) {
      ADD_FAILURE() << GetParam() << " " << doc.name << " add_special=" << add << " split_special=" << split << ": "
                    << ids_context(ours, want);
    }
  }
  EXPECT_EQ(failed, 0u);
  EXPECT_GE(checked, 100u);
}

TEST_P(Golden, DecodeEqualsHf) {
  const Tokenizer& tok = testing::test_tokenizer(GetParam());
  size_t failed = 0;
  for (const auto& d : golden(GetParam()).at("decodes")) {
    const auto ids = d.at("ids").get<std::vector<int32_t>>();
    const auto text = tok.decode(ids, d.at("skip_special").get<bool>());
    if (text != d.at("text").get<std::string>() && ++failed <= 10) {
      ADD_FAILURE() << GetParam() << " decode of " << nlohmann::json(ids).dump().substr(0, 200) << ": got "
                    << nlohmann::json(text).dump() << " want " << d.at("text").dump();
    }
  }
  EXPECT_EQ(failed, 0u);
}

TEST_P(Golden, StreamingDecodeEqualsFullDecode) {
  const Tokenizer& tok = testing::test_tokenizer(GetParam());
  for (const auto& c : golden(GetParam()).at("cases")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      const std::string full = tok.decode(ids, skip);
      for (size_t chunk : {size_t{1}, size_t{3}}) {
        IncrementalDetokenizer detok(tok, skip);
        std::string streamed;
        for (size_t i = 0; i < ids.size(); i += chunk) {
          const std::string part = detok.push(std::span<const int32_t>(ids).subspan(i, std::min(chunk, ids.size() - i)));
          streamed += part;
        }
        streamed += detok.finish();
        ASSERT_EQ(streamed, full) << GetParam() << " doc " << c.at("doc") << " skip=" << skip << " chunk=" << chunk;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Golden,
                         ::testing::Values("qwen3", "qwen35", "llama3", "gpt2", "flags", "behaviors"));

// decode(encode(x)) gives x back, NFC-normalized for the NFC tokenizers.
class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, DecodeOfEncodeIsTheNormalizedText) {
  const Tokenizer& tok = testing::test_tokenizer(GetParam());
  const bool is_nfc = GetParam() == "qwen3" || GetParam() == "qwen35";
  for (const auto& doc : corpus()) {
    for (bool split : {false, true}) {
      const auto ids = tok.encode(doc.text, false, split);
      const std::string want = is_nfc ? nfc(doc.text) : doc.text;
      ASSERT_EQ(tok.decode(ids), want) << GetParam() << " " << doc.name << " split_special=" << split;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, RoundTrip, ::testing::Values("qwen3", "qwen35", "llama3", "gpt2"));

}  // namespace
}  // namespace hyllm
