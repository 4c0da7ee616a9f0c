#include "serve/structured_request.h"

#include <fmt/format.h>

#include "engine/allowed_tokens_constraint.h"
#include "engine/bad_words_constraint.h"
#include "serve/api_error.h"
#include "serve/json_fields.h"
#include "serve/limits.h"

namespace hyllm::serve {
namespace {

using structured::GrammarKind;
using structured::GrammarSpec;

std::string schema_text(const Json& schema, const char* param) {
  if (schema.is_string()) {
    // vLLM accepts the schema as a JSON string too.
    const std::string& text = schema.get_ref<const std::string&>();
    if (!json_depth_within(text)) {
      throw bad_request(fmt::format("the JSON schema nests deeper than {} levels", kMaxJsonDepth), param);
    }
    try {
      Json parsed = Json::parse(text);
      return schema_text(parsed, param);
    } catch (const Json::parse_error&) {
      throw bad_request("the JSON schema is a string that is not JSON", param);
    }
  }
  if (!schema.is_object() && !schema.is_boolean()) throw bad_request("a JSON schema must be an object", param);
  std::string text = schema.dump();
  if (text.size() > kMaxGrammarBytes) {
    throw bad_request(fmt::format("the JSON schema is larger than {} bytes", kMaxGrammarBytes), param);
  }
  return text;
}

std::string bounded_string(const Json& v, const char* what, const char* param) {
  if (!v.is_string()) throw bad_request(fmt::format("`{}` must be a string", what), param);
  std::string s = v.get<std::string>();
  if (s.empty()) throw bad_request(fmt::format("`{}` must not be empty", what), param);
  if (s.size() > kMaxGrammarBytes) {
    throw bad_request(fmt::format("`{}` is larger than {} bytes", what, kMaxGrammarBytes), param);
  }
  return s;
}

std::optional<GrammarSpec> from_response_format(const Json& f) {
  constexpr const char* kParam = "response_format";
  if (!f.is_object()) throw bad_request("`response_format` must be an object", kParam);
  FieldReader r(f);
  const std::string type = r.string("type").value_or("text");
  if (type == "text") return std::nullopt;
  if (type == "json_object") return GrammarSpec{GrammarKind::kJsonObject};
  if (type == "json_schema") {
    const Json* js = r.object("json_schema");
    if (!js || !js->contains("schema") || (*js)["schema"].is_null()) {
      throw bad_request("response_format of type json_schema needs `json_schema.schema`", kParam);
    }
    return GrammarSpec{GrammarKind::kJsonSchema, schema_text((*js)["schema"], kParam)};
  }
  if (type == "structural_tag") {
    Json tag = f;
    if (tag.dump().size() > kMaxGrammarBytes) throw bad_request("the structural tag is too large", kParam);
    return GrammarSpec{GrammarKind::kStructuralTag, tag.dump()};
  }
  throw bad_request(fmt::format("response_format type `{}` is not one of text, json_object, json_schema, "
                                "structural_tag",
                                type),
                    kParam);
}

std::optional<GrammarSpec> from_structured_outputs(const Json& so) {
  constexpr const char* kParam = "structured_outputs";
  if (!so.is_object()) throw bad_request("`structured_outputs` must be an object", kParam);
  FieldReader r(so);
  std::vector<GrammarSpec> specs;
  if (const Json* j = r.get("json")) specs.push_back({GrammarKind::kJsonSchema, schema_text(*j, kParam)});
  if (const Json* re = r.get("regex")) specs.push_back({GrammarKind::kRegex, bounded_string(*re, "regex", kParam)});
  if (const Json* c = r.get("choice")) {
    if (!c->is_array() || c->empty()) throw bad_request("`choice` must be a non-empty list of strings", kParam);
    GrammarSpec s{GrammarKind::kChoice};
    size_t bytes = 0;
    for (const auto& e : *c) {
      s.choices.push_back(bounded_string(e, "choice", kParam));
      bytes += s.choices.back().size();
    }
    if (bytes > kMaxGrammarBytes) throw bad_request("`choice` is too large", kParam);
    specs.push_back(std::move(s));
  }
  if (const Json* g = r.get("grammar")) specs.push_back({GrammarKind::kEbnf, bounded_string(*g, "grammar", kParam)});
  if (r.boolean("json_object").value_or(false)) specs.push_back({GrammarKind::kJsonObject});
  if (const Json* t = r.get("structural_tag")) {
    specs.push_back({GrammarKind::kStructuralTag, bounded_string(*t, "structural_tag", kParam)});
  }
  if (specs.size() > 1) {
    throw bad_request("structured_outputs: set only one of json, regex, choice, grammar, json_object, "
                      "structural_tag",
                      kParam);
  }
  if (specs.empty()) return std::nullopt;
  if (r.boolean("disable_any_whitespace").value_or(false)) specs.front().any_whitespace = false;
  return std::move(specs.front());
}

}  // namespace

std::optional<GrammarSpec> parse_structured_output(const FieldReader& r) {
  std::optional<GrammarSpec> a, b;
  if (const Json* f = r.get("response_format")) a = from_response_format(*f);
  if (const Json* so = r.get("structured_outputs")) b = from_structured_outputs(*so);
  if (a && b) {
    throw bad_request("set either response_format or structured_outputs, not both", "structured_outputs");
  }
  return a ? a : b;
}

std::vector<std::shared_ptr<TokenConstraint>> make_constraints(const structured::GrammarCompiler& compiler,
                                                               const GrammarSpec& spec, int n,
                                                               const structured::ConstraintOptions& options) {
  std::shared_ptr<const structured::CompiledGrammar> grammar;
  try {
    grammar = compiler.compile(spec);
  } catch (const structured::GrammarError& e) {
    const char* param = spec.kind == GrammarKind::kStructuralTag ? "tools" : "response_format";
    throw bad_request(fmt::format("Invalid structured output: {}", e.what()), param);
  }
  std::vector<std::shared_ptr<TokenConstraint>> out;
  for (int i = 0; i < n; ++i) out.push_back(structured::make_grammar_constraint(grammar, options));
  return out;
}

std::vector<std::vector<int32_t>> bad_words_token_ids(const Tokenizer* tokenizer, const std::vector<std::string>& words,
                                                      int model_vocab_size) {
  std::vector<std::vector<int32_t>> out;
  if (words.empty()) return out;
  if (!tokenizer) throw bad_request("bad_words need the tokenizer, which `skip_tokenizer_init=True` leaves out", "bad_words");
  for (const std::string& word : words) {
    const std::string bare = word.substr(word.find_first_not_of(" \t\n\r\f\v"));
    std::vector<int32_t> alone = tokenizer->encode(bare, false);
    std::vector<int32_t> spaced = tokenizer->encode(" " + bare, false);
    if (alone.empty()) throw bad_request("bad_words: a word has no tokens", "bad_words");
    const bool inside = !spaced.empty() && spaced.front() != alone.front() && spaced.size() == alone.size();
    out.push_back(std::move(alone));
    if (inside) out.push_back(std::move(spaced));
  }
  for (const auto& ids : out) {
    for (int32_t t : ids) {
      if (t < 0 || t >= model_vocab_size) {
        throw bad_request(fmt::format("The model vocabulary size is {} but bad_words tokenize to token id {}. All "
                                      "token id values should be integers satisfying: 0 <= token_id < {}.",
                                      model_vocab_size, t, model_vocab_size),
                          "bad_words");
      }
    }
  }
  return out;
}

std::vector<std::shared_ptr<TokenConstraint>> choice_constraints(const structured::GrammarCompiler* compiler,
                                                                 const ChoiceLimits& limits, int model_vocab_size,
                                                                 int n, const structured::ConstraintOptions& options) {
  if (limits.grammar) {
    if (!compiler) throw bad_request("this server does not offer structured output", "response_format");
    for (const auto& [present, field] : {std::pair{!limits.allowed_token_ids.empty(), "allowed_token_ids"},
                                         std::pair{!limits.bad_words.empty(), "bad_words"}}) {
      if (!present) continue;
      throw bad_request(fmt::format("{} cannot be combined with response_format, structured_outputs or a required "
                                    "or named tool choice",
                                    field),
                        field);
    }
    return make_constraints(*compiler, *limits.grammar, n, options);
  }
  if (!limits.bad_words.empty()) {
    return make_bad_words_constraints(limits.bad_words, limits.allowed_token_ids, model_vocab_size, n);
  }
  if (!limits.allowed_token_ids.empty()) {
    return make_allowed_tokens_constraints(limits.allowed_token_ids, model_vocab_size, n);
  }
  return {};
}

}  // namespace hyllm::serve
