#pragma once
// The tokenizer part of a GGUF file for llama.cpp's byte-level BPE ("gpt2")
// tokenizer, read from a Hugging Face tokenizer.json (+ tokenizer_config.json,
// chat_template.jinja, config.json): the token list padded to the model's
// vocab size with "[PAD<id>]" tokens of type unused (as llama.cpp's
// converter pads), token types, merges, special token ids, the
// pre-tokenizer name llama.cpp knows the tokenizer's split regex by, and the
// chat template.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hyllm::gguf {

class GgufWriter;

// llama.cpp's token types (llama_token_type).
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct GgufVocab {
  std::string pre;  // tokenizer.ggml.pre, e.g. "qwen35"
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // "left right"
  std::map<std::string, int32_t> special_ids;  // "bos", "eos", "pad", ... -> id
  bool add_bos = false;
  std::optional<std::string> chat_template;
};

// Reads the tokenizer of `dir` (tokenizer.json is required) for a model of
// `vocab_size` embedding rows. Unknown split regexes, non-BPE models and
// token ids beyond vocab_size are kInvalidArgument/kUnsupported naming them.
GgufVocab read_hf_vocab(const std::filesystem::path& dir, int64_t vocab_size);

// A placeholder vocabulary for checkpoints without a tokenizer (the test
// models): the 256 byte tokens of byte-level BPE, no merges, padded to
// vocab_size; prompts must then be given as token ids. vocab_size >= 256.
GgufVocab byte_level_vocab(int64_t vocab_size);

void write_vocab(const GgufVocab& vocab, GgufWriter& out);

}  // namespace hyllm::gguf
