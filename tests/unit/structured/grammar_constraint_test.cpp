// Structured output on the embedded model's vocabulary: grammars compile (or
// fail with a GrammarError), masks allow exactly what the grammar allows, and
// a constrained greedy walk over arbitrary scores yields text that fits.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <regex>

#include "structured/grammar_compiler.h"
#include "structured/grammar_constraint.h"

namespace hyllm::structured {
namespace {

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok =
      Tokenizer::from_model_dir(std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny");
  return tok;
}

constexpr int32_t kImEnd = 8168;
constexpr int32_t kEndOfText = 8166;

// Model vocab padded past the tokenizer's, as real checkpoints are.
const GrammarCompiler& compiler() {
  static const GrammarCompiler c(tiny_tokenizer(), tiny_tokenizer().vocab_size() + 64, {kImEnd, kEndOfText});
  return c;
}

struct Walk {
  std::string text;
  bool ended_with_stop = false;
  int forced = 0;
};

// Generates with the constraint: the "model" prefers tokens by a seeded
// random score; only allowed tokens may be picked. Forced tokens are taken
// as the engine would take them.
Walk walk(TokenConstraint& c, uint64_t seed, int max_tokens = 400) {
  const int vocab = compiler().vocab_size();
  std::vector<uint32_t> mask(static_cast<size_t>(bitmask_words(vocab)));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> score(0.0, 1.0);
  std::vector<int32_t> ids;
  Walk w;
  for (int step = 0; step < max_tokens; ++step) {
    std::fill(mask.begin(), mask.end(), 0xffffffffu);
    const bool constrained = c.fill_next_token_bitmask(mask);
    int32_t best = -1;
    double best_score = -1;
    for (int32_t t = 0; t < vocab; ++t) {
      if (constrained && !bitmask_allows(mask, t)) continue;
      // Stop tokens get a low score so that walks run a while.
      const double s = score(rng) * ((t == kImEnd || t == kEndOfText) ? 0.2 : 1.0);
      if (s > best_score) best_score = s, best = t;
    }
    EXPECT_GE(best, 0) << "nothing allowed after " << w.text;
    if (best < 0) break;
    EXPECT_TRUE(c.accept_token(best));
    if (best == kImEnd || best == kEndOfText) {
      w.ended_with_stop = true;
      break;
    }
    ids.push_back(best);
    for (int32_t f : c.forced_tokens(max_tokens)) {
      ids.push_back(f);
      ++w.forced;
    }
  }
  w.text = tiny_tokenizer().decode(ids);
  return w;
}

TEST(GrammarCompiler, BadGrammarsAreGrammarErrors) {
  EXPECT_THROW(compiler().compile({GrammarKind::kJsonSchema, "{not json"}), GrammarError);
  EXPECT_THROW(compiler().compile({GrammarKind::kJsonSchema, R"({"type": "no-such-type"})"}), GrammarError);
  EXPECT_THROW(compiler().compile({GrammarKind::kRegex, "(unclosed"}), GrammarError);
  EXPECT_THROW(compiler().compile({GrammarKind::kEbnf, "root ::= missing_rule"}), GrammarError);
  EXPECT_THROW(compiler().compile({GrammarKind::kEbnf, "this is not ebnf"}), GrammarError);
  EXPECT_THROW(compiler().compile({GrammarKind::kStructuralTag, R"({"type": "structural_tag"})"}), GrammarError);
  GrammarSpec empty_choice{GrammarKind::kChoice};
  EXPECT_THROW(compiler().compile(empty_choice), GrammarError);
  // The message is the compiler's reason alone: no log time, no source path.
  try {
    compiler().compile({GrammarKind::kRegex, "(unclosed"});
  } catch (const GrammarError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find(".cc:"), std::string::npos) << what;
    EXPECT_NE(what.find("Regex parsing error"), std::string::npos) << what;
    EXPECT_NE(what.front(), '[') << what;
  }
}

TEST(GrammarCompiler, CachesPerGrammarText) {
  const std::string schema = R"({"type": "object", "properties": {"cache_probe": {"type": "integer"}},
                                 "required": ["cache_probe"]})";
  const auto t0 = std::chrono::steady_clock::now();
  compiler().compile({GrammarKind::kJsonSchema, schema});
  const auto first = std::chrono::steady_clock::now() - t0;
  const int64_t bytes = compiler().cache_bytes();
  EXPECT_GT(bytes, 0);
  // The fastest of a few cached compiles, so that one descheduling of this
  // thread on a busy machine cannot make a hit look slower than the compile.
  auto cached = std::chrono::steady_clock::duration::max();
  for (int i = 0; i < 5; ++i) {
    const auto t = std::chrono::steady_clock::now();
    compiler().compile({GrammarKind::kJsonSchema, schema});
    cached = std::min(cached, std::chrono::steady_clock::now() - t);
  }
  EXPECT_EQ(compiler().cache_bytes(), bytes) << "a second compile of the same schema added to the cache";
  EXPECT_LT(cached, first);
}

TEST(GrammarConstraint, JsonSchemaWalksGiveValidJson) {
  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 3},
      "ok": {"type": "boolean"}
    },
    "required": ["name", "age", "tags", "ok"],
    "additionalProperties": false
  })";
  GrammarSpec spec{GrammarKind::kJsonSchema, schema};
  spec.any_whitespace = false;
  auto grammar = compiler().compile(spec);
  int forced = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    auto c = make_grammar_constraint(grammar, {});
    Walk w = walk(*c, seed);
    ASSERT_TRUE(w.ended_with_stop) << w.text;
    forced += w.forced;
    auto j = nlohmann::json::parse(w.text);
    EXPECT_TRUE(j["name"].is_string()) << w.text;
    EXPECT_TRUE(j["age"].is_number_integer()) << w.text;
    EXPECT_LE(j["age"].get<int>(), 150);
    EXPECT_TRUE(j["tags"].is_array());
    EXPECT_TRUE(j["ok"].is_boolean());
    EXPECT_EQ(j.size(), 4u);
  }
  EXPECT_GT(forced, 0) << "the fixed keys were never jumped over";
}

TEST(GrammarConstraint, RegexChoiceAndEbnf) {
  auto re = compiler().compile({GrammarKind::kRegex, "[a-z]{3}-[0-9]{2}"});
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    auto c = make_grammar_constraint(re, {});
    Walk w = walk(*c, seed);
    EXPECT_TRUE(std::regex_match(w.text, std::regex("[a-z]{3}-[0-9]{2}"))) << w.text;
  }
  GrammarSpec choice{GrammarKind::kChoice};
  choice.choices = {"positive", "negative", "say \"neutral\"\n"};
  auto ch = compiler().compile(choice);
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    auto c = make_grammar_constraint(ch, {});
    Walk w = walk(*c, seed);
    EXPECT_TRUE(w.text == "positive" || w.text == "negative" || w.text == "say \"neutral\"\n") << w.text;
  }
  auto g = compiler().compile({GrammarKind::kEbnf, R"(root ::= "SELECT " col (", " col)* ";"
col ::= "id" | "name" | "age")"});
  auto c = make_grammar_constraint(g, {});
  Walk w = walk(*c, 3);
  EXPECT_TRUE(std::regex_match(w.text, std::regex("SELECT (id|name|age)(, (id|name|age))*;"))) << w.text;
}

TEST(GrammarConstraint, SpecialTokensNeverMatchText) {
  auto g = compiler().compile({GrammarKind::kJsonObject});
  auto c = make_grammar_constraint(g, {});
  std::vector<uint32_t> mask(static_cast<size_t>(bitmask_words(compiler().vocab_size())));
  ASSERT_TRUE(c->fill_next_token_bitmask(mask));
  EXPECT_TRUE(bitmask_allows(mask, *tiny_tokenizer().token_to_id("{")));
  EXPECT_FALSE(bitmask_allows(mask, 8167));  // <|im_start|>
  EXPECT_FALSE(bitmask_allows(mask, kImEnd)) << "an empty output is no JSON object";
  EXPECT_FALSE(bitmask_allows(mask, compiler().vocab_size() - 1)) << "padding ids are never allowed";
  EXPECT_FALSE(c->accept_token(*tiny_tokenizer().token_to_id("x")));
}

TEST(GrammarConstraint, ReasoningComesFirstUnconstrained) {
  auto g = compiler().compile({GrammarKind::kRegex, "yes|no"});
  const int32_t open = *tiny_tokenizer().token_to_id("<think>");
  const int32_t close = *tiny_tokenizer().token_to_id("</think>");
  std::vector<uint32_t> mask(static_cast<size_t>(bitmask_words(compiler().vocab_size())));
  ConstraintOptions in_reasoning;
  in_reasoning.reasoning_end_token = close;
  in_reasoning.starts_in_reasoning = true;
  auto c = make_grammar_constraint(g, in_reasoning);
  EXPECT_FALSE(c->fill_next_token_bitmask(mask));
  EXPECT_TRUE(c->accept_token(*tiny_tokenizer().token_to_id("x")));
  EXPECT_TRUE(c->accept_token(close));
  ASSERT_TRUE(c->fill_next_token_bitmask(mask));
  EXPECT_FALSE(bitmask_allows(mask, *tiny_tokenizer().token_to_id("x")));
  EXPECT_FALSE(c->accept_token(*tiny_tokenizer().token_to_id("x")));

  // Not in reasoning yet: the first token may open it, or start the answer.
  ConstraintOptions may_open = in_reasoning;
  may_open.starts_in_reasoning = false;
  may_open.reasoning_start_token = open;
  auto d = make_grammar_constraint(g, may_open);
  ASSERT_TRUE(d->fill_next_token_bitmask(mask));
  EXPECT_TRUE(bitmask_allows(mask, open));
  EXPECT_FALSE(bitmask_allows(mask, close));
  EXPECT_TRUE(d->accept_token(open));
  EXPECT_FALSE(d->fill_next_token_bitmask(mask));
  auto e = make_grammar_constraint(g, may_open);
  Walk w = walk(*e, 1);
  EXPECT_TRUE(w.text == "yes" || w.text == "no" || w.text.find("</think>") != std::string::npos) << w.text;
}

}  // namespace
}  // namespace hyllm::structured

namespace hyllm::structured {
namespace {

TEST(GrammarConstraint, AfterTheGrammarEndsNothingIsConstrained) {
  // With ignore_eos the engine keeps sampling after the stop token.
  auto g = compiler().compile({GrammarKind::kRegex, "ok"});
  auto c = make_grammar_constraint(g, {});
  std::vector<uint32_t> mask(static_cast<size_t>(bitmask_words(compiler().vocab_size())));
  for (int32_t t : tiny_tokenizer().encode("ok", false)) ASSERT_TRUE(c->accept_token(t));
  ASSERT_TRUE(c->fill_next_token_bitmask(mask));
  EXPECT_TRUE(bitmask_allows(mask, kImEnd));
  EXPECT_FALSE(bitmask_allows(mask, *tiny_tokenizer().token_to_id("x")));
  ASSERT_TRUE(c->accept_token(kImEnd));
  EXPECT_FALSE(c->fill_next_token_bitmask(mask));
  EXPECT_TRUE(c->accept_token(*tiny_tokenizer().token_to_id("x")));
}

}  // namespace
}  // namespace hyllm::structured
