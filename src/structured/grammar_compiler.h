#pragma once
// Structured output, compile side: JSON schemas, regexes, choices, EBNF
// grammars and xgrammar structural tags compiled against the served
// vocabulary, cached per grammar text. The xgrammar library
// (third_party/xgrammar) does the compiling and, per request, the token
// masks (grammar_constraint.h); this layer hides it from everyone else.
//
//   GrammarCompiler compiler(tokenizer, model_vocab_size, eos_ids);
//   auto grammar = compiler.compile({GrammarKind::kJsonSchema, schema_text});   // throws GrammarError
//   auto constraint = make_grammar_constraint(grammar, {...});                   // one per choice
//
// Thread-safe: request threads compile concurrently.

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace hyllm::structured {

enum class GrammarKind {
  kJsonSchema,     // text: a JSON Schema document
  kJsonObject,     // any JSON object (response_format json_object); text unused
  kRegex,          // text: a regular expression the whole output must match
  kChoice,         // choices: the output is exactly one of them
  kEbnf,           // text: an EBNF grammar (xgrammar/GBNF dialect) with a `root` rule
  kStructuralTag,  // text: an xgrammar structural tag (JSON), e.g. forced tool calls
};

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonSchema;
  std::string text;
  std::vector<std::string> choices;
  // JSON only: whitespace between tokens is free (vLLM's default); false
  // gives compact JSON with single spaces after ',' and ':'.
  bool any_whitespace = true;
};

// A grammar the client gave that cannot be compiled: the server answers 400
// with what() as the message.
class GrammarError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A compiled grammar, shared by every request that uses the same text.
struct CompiledGrammar;

class GrammarCompiler {
 public:
  // vocab_size: the model's logits width (may exceed the tokenizer's; the
  // extra ids are never allowed). stop_token_ids end a grammar's output
  // (the engine's EOS ids).
  GrammarCompiler(const Tokenizer& tokenizer, int vocab_size, std::vector<int32_t> stop_token_ids);
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Throws GrammarError for grammar text that does not parse or uses what
  // the compiler does not support.
  std::shared_ptr<const CompiledGrammar> compile(const GrammarSpec& spec) const;

  int vocab_size() const { return vocab_size_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  // Bytes the compiled-grammar cache holds now.
  int64_t cache_bytes() const;

 private:
  struct Impl;
  const Tokenizer& tokenizer_;
  int vocab_size_;
  std::unique_ptr<Impl> impl_;
};

// A JSON string literal of `text` for EBNF grammars (quotes included).
std::string ebnf_string_literal(const std::string& text);

}  // namespace hyllm::structured
