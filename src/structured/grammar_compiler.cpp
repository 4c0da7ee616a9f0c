#include "structured/grammar_compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <thread>

#include "structured/grammar_compiler_impl.h"
#include "util/log.h"

namespace hyllm::structured {
namespace {

// The vocabulary as xgrammar reads it: each token's raw bytes (VocabType::RAW,
// so no byte-level decoding happens twice). Special added tokens other than
// the stop tokens get "", which xgrammar treats as never matching text: a
// grammar cannot make the model write <|im_start|>. Added tokens that are not
// special (<tool_call>, <think>) match their text like any other token.
std::vector<std::string> raw_vocabulary(const Tokenizer& tok, const std::vector<int32_t>& stop_ids) {
  std::vector<std::string> vocab(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    const bool stop = std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end();
    if (tok.is_special(id) && !stop) continue;
    vocab[static_cast<size_t>(id)] = tok.token_bytes(id);
    // A stop token must not be "" (xgrammar would treat it as special).
    if (stop && vocab[static_cast<size_t>(id)].empty()) vocab[static_cast<size_t>(id)] = tok.id_to_token(id);
  }
  return vocab;
}

const std::string kAnyObject = R"({"type": "object"})";
// Free whitespace between JSON tokens is bounded per gap: deep indentation
// fits, and a model cannot spend its whole budget on blanks.
constexpr int kMaxJsonWhitespace = 12;
// The compiled-grammar cache's bound (xgrammar evicts the least recently used
// grammars past it; unbounded by default). Every distinct schema a client
// sends is a new entry, so a long-running server needs one; vLLM's default.
constexpr int64_t kGrammarCacheBytes = int64_t{512} << 20;

}  // namespace

struct GrammarCompiler::Impl {
  Impl(const std::vector<std::string>& vocab, int vocab_size, std::vector<int32_t> stop_ids)
      : info(vocab, xgrammar::VocabType::RAW, vocab_size, std::move(stop_ids)),
        compiler(info, std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8),
                 /*cache_enabled=*/true, kGrammarCacheBytes) {}
  xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;
};

GrammarCompiler::GrammarCompiler(const Tokenizer& tokenizer, int vocab_size, std::vector<int32_t> stop_token_ids)
    : tokenizer_(tokenizer), vocab_size_(vocab_size) {
  if (vocab_size < tokenizer.vocab_size()) {
    throw std::invalid_argument(fmt::format("structured output: the model's vocabulary ({}) is smaller than the "
                                            "tokenizer's ({})",
                                            vocab_size, tokenizer.vocab_size()));
  }
  std::vector<int32_t> stops;
  for (int32_t id : stop_token_ids) {
    if (id >= 0 && id < tokenizer.vocab_size()) stops.push_back(id);
  }
  impl_ = std::make_unique<Impl>(raw_vocabulary(tokenizer, stops), vocab_size, stops);
}

GrammarCompiler::~GrammarCompiler() = default;

std::string ebnf_string_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const GrammarSpec& spec) const {
  std::optional<xgrammar::CompiledGrammar> compiled;
  // xgrammar reports bad input by throwing (its own error types derive from
  // std::exception); none of them may escape as anything but a GrammarError.
  try {
    xgrammar::GrammarCompiler& c = impl_->compiler;
    switch (spec.kind) {
      case GrammarKind::kJsonSchema:
      case GrammarKind::kJsonObject: {
        const std::string& schema = spec.kind == GrammarKind::kJsonObject ? kAnyObject : spec.text;
        std::optional<std::pair<std::string, std::string>> separators;
        if (!spec.any_whitespace) separators.emplace(", ", ": ");
        compiled = c.CompileJSONSchema(schema, spec.any_whitespace, std::nullopt, separators, /*strict_mode=*/true,
                                       spec.any_whitespace ? std::optional<int>(kMaxJsonWhitespace) : std::nullopt);
        break;
      }
      case GrammarKind::kRegex:
        compiled = c.CompileRegex(spec.text);
        break;
      case GrammarKind::kChoice: {
        if (spec.choices.empty()) throw GrammarError("`choice` must list at least one string");
        std::string ebnf = "root ::= ";
        for (size_t i = 0; i < spec.choices.size(); ++i) {
          if (spec.choices[i].empty()) throw GrammarError("`choice` entries must not be empty");
          ebnf += (i ? " | " : "") + ebnf_string_literal(spec.choices[i]);
        }
        compiled = c.CompileGrammar(ebnf, "root");
        break;
      }
      case GrammarKind::kEbnf:
        compiled = c.CompileGrammar(spec.text, "root");
        break;
      case GrammarKind::kStructuralTag:
        compiled = c.CompileStructuralTag(spec.text);
        break;
    }
  } catch (const GrammarError&) {
    throw;
  } catch (const std::exception& e) {
    // xgrammar's messages start with a log prefix ("[13:20:35]
    // /path/to/regex_converter.cc:75: "), which tells the client nothing
    // and the server's paths to anyone; they may end with a newline.
    static const std::regex kLogPrefix(R"(^\[\d+:\d+:\d+\] \S+:\d+: )");
    std::string what =
        std::regex_replace(std::string(e.what()), kLogPrefix, "", std::regex_constants::format_first_only);
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    throw GrammarError(what);
  }
  return std::make_shared<const CompiledGrammar>(std::move(*compiled), this);
}

int64_t GrammarCompiler::cache_bytes() const { return impl_->compiler.GetCacheSizeBytes(); }

}  // namespace hyllm::structured
