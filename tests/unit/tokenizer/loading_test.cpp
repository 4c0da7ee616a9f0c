// Loading: real files, the 248K-vocabulary layout of Qwen3.5, config
// fields, and clear errors for files hyllm does not support.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <thread>

#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "tokenizer_fixture.h"
#include "util/status.h"

namespace hyllm {
namespace {

ErrorCode load_error(const std::string& json, const std::string& config = "") {
  try {
    (void)Tokenizer::from_json_string(json, config);
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kOk;
}

// A small byte-level BPE tokenizer written by hand.
nlohmann::json tiny_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (const char* t : {"a", "b", "c", "d", "h", "i", "Ġ", "ab", "abc", "Ġa", "hi", "Ġhi"}) vocab[t] = id++;
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array({{{"id", 12}, {"content", "<s>"}, {"special", true}, {"normalized", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", nlohmann::json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {12}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({"a b", nlohmann::json::array({"ab", "c"}), "Ġ a", "h i", "Ġ hi"})}}}};
}

TEST(Loading, HandMadeTokenizerMergesAndTemplate) {
  const auto t = Tokenizer::from_json_string(tiny_tokenizer().dump(),
                                             R"({"bos_token": {"content": "<s>"}, "eos_token": null,
                                                 "add_bos_token": true,
                                                 "chat_template": [{"name": "default", "template": "D"},
                                                                   {"name": "tool_use", "template": "T"}]})");
  EXPECT_EQ(t.vocab_size(), 13);
  EXPECT_EQ(t.encode("abc hi ab", false), (std::vector<int32_t>{8, 11, 6, 7}));
  EXPECT_EQ(t.encode("abc", true), (std::vector<int32_t>{12, 8}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{12, 8, 11}), "<s>abc hi");
  EXPECT_EQ(t.decode(std::vector<int32_t>{12, 8, 11, 99, -1}, true), "abc hi");
  EXPECT_EQ(t.bos_token_id(), 12);
  EXPECT_FALSE(t.eos_token().has_value());
  EXPECT_EQ(t.add_bos_token(), true);
  ASSERT_NE(t.chat_template_source(), nullptr);
  EXPECT_EQ(*t.chat_template_source(), "D");
  ASSERT_NE(t.chat_template_source("tool_use"), nullptr);
  EXPECT_EQ(*t.chat_template_source("tool_use"), "T");
  EXPECT_EQ(t.id_to_token(11), "Ġhi");
  EXPECT_EQ(t.token_bytes(11), " hi");
  EXPECT_EQ(t.token_to_id("<s>"), 12);
  EXPECT_FALSE(t.token_to_id("zzz").has_value());
  EXPECT_EQ(t.id_to_token(1000), "");
  // 'x' has no byte token and there is no unk: dropped, as in HF.
  EXPECT_EQ(t.encode("xa", false), (std::vector<int32_t>{0}));
}

TEST(Loading, UnsupportedAndCorruptFiles) {
  EXPECT_EQ(load_error("{not json"), ErrorCode::kCorruptData);
  EXPECT_EQ(load_error("[]"), ErrorCode::kCorruptData);
  EXPECT_EQ(load_error(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})"), ErrorCode::kUnsupported);
  EXPECT_EQ(load_error(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})"), ErrorCode::kUnsupported);
  auto j = tiny_tokenizer();
  j["model"]["merges"].push_back("a zz");
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kCorruptData);
  j = tiny_tokenizer();
  j["model"]["merges"].push_back("abc");
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kCorruptData);
  j = tiny_tokenizer();
  j["model"]["vocab"]["huge"] = 1ll << 40;
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kCorruptData);
  j = tiny_tokenizer();
  j["model"]["vocab"]["str"] = "x";
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kCorruptData);
  j = tiny_tokenizer();
  j["model"].erase("merges");
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kCorruptData);
  j = tiny_tokenizer();
  j["model"]["dropout"] = 0.1;
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kUnsupported);
  j = tiny_tokenizer();
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kUnsupported);
  j = tiny_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(bad"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kCorruptData);
  j = tiny_tokenizer();
  j["normalizer"] = {{"type", "BertNormalizer"}};
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kUnsupported);
  EXPECT_EQ(load_error(tiny_tokenizer().dump(), "{bad"), ErrorCode::kCorruptData);
  // A post processor whose ids lie past the vocabulary would make encode()
  // hand the model an id it has no embedding for.
  j = tiny_tokenizer();
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = {13};
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kCorruptData);
  j = tiny_tokenizer();
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors", nlohmann::json::array({{{"type", "ByteLevel"}},
                                                               {{"type", "BertProcessing"},
                                                                {"cls", {"<s>", 12}},
                                                                {"sep", {"</s>", 40}}}})}};
  EXPECT_EQ(load_error(j.dump()), ErrorCode::kCorruptData);
  j = tiny_tokenizer();
  j["truncation"] = {{"max_length", 8}};
  const auto t = Tokenizer::from_json_string(j.dump());
  EXPECT_EQ(t.load_warnings().size(), 1u);
}

TEST(Loading, MissingFilesAreNotFound) {
  try {
    (void)Tokenizer::from_model_dir("/nonexistent/model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
  const auto dir = std::filesystem::temp_directory_path() / "hyllm_tokenizer_empty_dir";
  std::filesystem::create_directories(dir);
  try {
    (void)Tokenizer::from_model_dir(dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(Loading, ChatTemplateFilePrecedence) {
  const auto dir = std::filesystem::temp_directory_path() / "hyllm_tokenizer_template_dir";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tiny_tokenizer().dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "from config"})";
  EXPECT_EQ(*Tokenizer::from_model_dir(dir).chat_template_source(), "from config");
  std::ofstream(dir / "chat_template.jinja") << "from jinja file";
  EXPECT_EQ(*Tokenizer::from_model_dir(dir).chat_template_source(), "from jinja file");
  std::filesystem::remove_all(dir);
}

TEST(Loading, InvalidUtf8TextIsRejected) {
  const Tokenizer& t = testing::test_tokenizer("qwen3");
  for (std::string bad : {"abc\xff", "\xC0\xAF", "x\xED\xA0\x80y", "\xF0\x9F\x99"}) {
    try {
      (void)t.encode(bad);
      FAIL() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
  }
}

TEST(Loading, Qwen3FilesAndSpecialTokens) {
  const Tokenizer& t = testing::test_tokenizer("qwen3");
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 151644);
  EXPECT_TRUE(t.is_special(151644));
  EXPECT_FALSE(t.is_special(151657));  // <tool_call> is added but not special
  EXPECT_TRUE(t.is_added(151657));
  EXPECT_FALSE(t.is_added(100));
  EXPECT_EQ(t.eos_token_id(), 151645);
  EXPECT_EQ(t.pad_token_id(), 151643);
  ASSERT_NE(t.chat_template_source(), nullptr);
  EXPECT_NE(t.chat_template_source()->find("<|im_start|>"), std::string::npos);
  // Special-token text is a control token by default, plain text when split.
  EXPECT_EQ(t.encode("a<|im_start|>b").at(1), 151644);
  for (int32_t id : t.encode("a<|im_start|>b", true, true)) EXPECT_NE(id, 151644);
  // Non-special added tokens stay matched even when splitting (HF).
  EXPECT_EQ(t.encode("<tool_call>", true, true), std::vector<int32_t>{151657});
}

// The Qwen3.5 layout: 248,044 regular tokens, then <|endoftext|> at 248044
// and the other added tokens after it (QWEN35.md section 6). Built from the
// Qwen3 vocabulary padded with filler tokens.
TEST(Loading, Qwen35SizedVocabularyLoadsQuickly) {
  auto j = nlohmann::json::parse(testing::variant_tokenizer_json("qwen35"));
  auto& vocab = j["model"]["vocab"];
  const int64_t regular = vocab.size();
  for (int64_t id = regular; id < 248044; ++id) vocab[fmt::format("ĠfillerĠ{}", id)] = id;
  auto added = j["added_tokens"];
  j["added_tokens"] = nlohmann::json::array();
  int64_t next = 248044;
  for (auto t : added) {
    t["id"] = next++;
    j["added_tokens"].push_back(t);
  }
  const std::string text = j.dump();
  const auto start = std::chrono::steady_clock::now();
  const auto t = Tokenizer::from_json_string(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("248K-vocabulary tokenizer.json (%.1f MB) loaded in %.3f s\n", text.size() / 1e6, seconds);
  EXPECT_LT(seconds, 5.0);  // well under 1 s on an idle machine; CI shares cores
  EXPECT_EQ(t.vocab_size(), 248044 + static_cast<int32_t>(added.size()));
  EXPECT_EQ(t.token_to_id("<|endoftext|>"), 248044);
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 248045);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 248046);
  EXPECT_EQ(t.encode("<|im_end|>"), std::vector<int32_t>{248046});
  EXPECT_EQ(t.decode(t.encode("Text with e\u0301 and 中文")), "Text with \u00e9 and 中文");
}

}  // namespace
}  // namespace hyllm

namespace hyllm {
namespace {

// Decoders other than ByteLevel (SentencePiece-style token strings), with
// outputs worked out from HF's decode_chain of each step.
TEST(Decoders, ReplaceByteFallbackFuseStrip) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (const char* t : {"<unk>", "▁Hello", "▁world", "<0xE4>", "<0xBD>", "<0xA0>", "<0xFF>", "!", "▁"}) vocab[t] = id++;
  const nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}, {"unk_token", "<unk>"},
                 {"byte_fallback", true}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", nlohmann::json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}},
                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}}};
  const auto t = Tokenizer::from_json_string(j.dump());
  EXPECT_EQ(t.decode(std::vector<int32_t>{1, 2, 7}), "Hello world!");
  // A run of byte tokens that is not valid UTF-8 as a whole: one U+FFFD per
  // byte (HF ByteFallback), even though its first three bytes form U+4F60.
  EXPECT_EQ(t.decode(std::vector<int32_t>{1, 3, 4, 5, 6, 7}), "Hello\uFFFD\uFFFD\uFFFD\uFFFD!");
  EXPECT_EQ(t.decode(std::vector<int32_t>{1, 3, 4, 5, 7}), "Hello你!");
  EXPECT_EQ(t.decode(std::vector<int32_t>{1, 3, 4, 7}), "Hello\uFFFD\uFFFD!");
  EXPECT_EQ(t.token_bytes(3), "\xE4");
  // Unknown characters: byte fallback where the bytes exist, else unk.
  EXPECT_EQ(t.encode("你", false), (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(t.encode("!?", false), (std::vector<int32_t>{7, 0}));
  // Streaming decode of a context-dependent decoder still equals decode.
  const std::vector<int32_t> ids{1, 3, 4, 5, 2, 8, 7};
  IncrementalDetokenizer d(t);
  std::string streamed;
  for (int32_t x : ids) streamed += d.push(x);
  streamed += d.finish();
  EXPECT_EQ(streamed, t.decode(ids));
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  const Tokenizer& t = testing::test_tokenizer("qwen3");
  const std::string text = "Concurrent encoding: 你好, мир, عالم, 12345, <|im_start|> done. ";
  std::string big;
  for (int i = 0; i < 200; ++i) big += text + std::to_string(i);
  const auto want = t.encode(big);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int r = 0; r < 5; ++r) {
        if (t.encode(big) != want) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace hyllm
