#include "gguf/gguf_vocab.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gguf/gguf_writer.h"
#include "util/status.h"

namespace hyllm::gguf {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) fail(ErrorCode::kNotFound, "{} not found", p.string());
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) fail(ErrorCode::kCorruptData, "{} is not valid JSON", p.string());
  return j;
}

// The split regexes of the tokenizers llama.cpp names, as tokenizer.json
// spells them (llama-vocab.cpp lists each next to its pre-tokenizer type).
struct KnownPre {
  const char* name;
  const char* regex;
};
constexpr KnownPre kKnownPre[] = {
    {"qwen35",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
};

void collect_split_regexes(const json& pre, std::vector<std::string>& out) {
  if (!pre.is_object()) return;
  if (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers"))
    for (const auto& p : pre["pretokenizers"]) collect_split_regexes(p, out);
  if (pre.value("type", "") == "Split" && pre.contains("pattern") && pre["pattern"].contains("Regex"))
    out.push_back(pre["pattern"]["Regex"].get<std::string>());
}

std::string pre_tokenizer_name(const json& tok, const fs::path& path) {
  std::vector<std::string> regexes;
  collect_split_regexes(tok.value("pre_tokenizer", json()), regexes);
  if (regexes.size() != 1)
    fail(ErrorCode::kUnsupported, "{}: expected one Split regex in pre_tokenizer, found {}", path.string(),
         regexes.size());
  for (const auto& k : kKnownPre)
    if (regexes[0] == k.regex) return k.name;
  fail(ErrorCode::kUnsupported, "{}: the split regex {} is not one llama.cpp's qwen35/qwen2 pre-tokenizers use",
       path.string(), regexes[0]);
}

std::optional<std::string> token_text(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
    return entry["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

GgufVocab read_hf_vocab(const fs::path& dir, int64_t vocab_size) {
  const fs::path tok_path = dir / "tokenizer.json";
  const json tok = read_json(tok_path);
  const json model = tok.value("model", json::object());
  if (model.value("type", "") != "BPE")
    fail(ErrorCode::kUnsupported, "{}: model type {} (only byte-level BPE is exported)", tok_path.string(),
         model.value("type", "?"));
  GgufVocab v;
  v.pre = pre_tokenizer_name(tok, tok_path);
  v.tokens.assign(static_cast<size_t>(vocab_size), {});
  v.types.assign(static_cast<size_t>(vocab_size), static_cast<int32_t>(TokenType::kUnused));
  std::vector<bool> seen(static_cast<size_t>(vocab_size), false);
  std::map<std::string, int32_t> ids;
  auto place = [&](const std::string& text, int64_t id, TokenType type) {
    if (id < 0 || id >= vocab_size)
      fail(ErrorCode::kInvalidArgument, "{}: token {} has id {}, beyond the model's vocab_size {}", tok_path.string(),
           text, id, vocab_size);
    v.tokens[static_cast<size_t>(id)] = text;
    v.types[static_cast<size_t>(id)] = static_cast<int32_t>(type);
    seen[static_cast<size_t>(id)] = true;
    ids[text] = static_cast<int32_t>(id);
  };
  const json vocab = model.value("vocab", json::object());
  for (const auto& [text, id] : vocab.items()) place(text, id.get<int64_t>(), TokenType::kNormal);
  for (const auto& a : tok.value("added_tokens", json::array()))
    place(a.at("content").get<std::string>(), a.at("id").get<int64_t>(),
          a.value("special", false) ? TokenType::kControl : TokenType::kUserDefined);
  for (int64_t i = 0; i < vocab_size; ++i)
    if (!seen[static_cast<size_t>(i)]) v.tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
  for (const auto& m : model.value("merges", json::array())) {
    if (m.is_string()) v.merges.push_back(m.get<std::string>());
    else if (m.is_array() && m.size() == 2) v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    else fail(ErrorCode::kCorruptData, "{}: a merge is neither \"a b\" nor [a, b]", tok_path.string());
  }

  json cfg = fs::exists(dir / "tokenizer_config.json") ? read_json(dir / "tokenizer_config.json") : json::object();
  json model_cfg = fs::exists(dir / "config.json") ? read_json(dir / "config.json") : json::object();
  for (const char* kind : {"bos", "eos", "unk", "sep", "pad", "cls", "mask"}) {
    const std::string k = kind;
    if (auto text = token_text(cfg.value(k + "_token", json())); text && ids.count(*text)) {
      v.special_ids[k] = ids[*text];
    } else if (model_cfg.contains(k + "_token_id") && model_cfg[k + "_token_id"].is_number_integer()) {
      const int64_t id = model_cfg[k + "_token_id"].get<int64_t>();
      if (id >= 0 && id < vocab_size) v.special_ids[k] = static_cast<int32_t>(id);
    }
  }
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) v.add_bos = cfg["add_bos_token"].get<bool>();
  // hyllm's rule (text/tokenizer.h): chat_template.jinja wins over the config's template.
  if (std::ifstream jinja(dir / "chat_template.jinja"); jinja) {
    std::stringstream ss;
    ss << jinja.rdbuf();
    v.chat_template = ss.str();
  } else if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) {
    v.chat_template = cfg["chat_template"].get<std::string>();
  }
  return v;
}

GgufVocab byte_level_vocab(int64_t vocab_size) {
  if (vocab_size < 256) fail(ErrorCode::kInvalidArgument, "a byte-level vocabulary needs vocab_size >= 256, not {}", vocab_size);
  GgufVocab v;
  v.pre = "qwen35";
  // GPT-2's byte-to-character map: printable bytes stand for themselves, the
  // others map to U+0100 onwards in byte order.
  auto printable = [](int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); };
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    v.tokens.push_back(s);
    v.types.push_back(static_cast<int32_t>(TokenType::kNormal));
  }
  for (int64_t i = 256; i < vocab_size; ++i) {
    v.tokens.push_back("[PAD" + std::to_string(i) + "]");
    v.types.push_back(static_cast<int32_t>(TokenType::kUnused));
  }
  return v;
}

void write_vocab(const GgufVocab& v, GgufWriter& out) {
  static const std::map<std::string, std::string> kKeys = {
      {"bos", "tokenizer.ggml.bos_token_id"},     {"eos", "tokenizer.ggml.eos_token_id"},
      {"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
      {"pad", "tokenizer.ggml.padding_token_id"}, {"cls", "tokenizer.ggml.cls_token_id"},
      {"mask", "tokenizer.ggml.mask_token_id"},
  };
  out.add_string("tokenizer.ggml.model", "gpt2");
  out.add_string("tokenizer.ggml.pre", v.pre);
  out.add_string_array("tokenizer.ggml.tokens", v.tokens);
  out.add_i32_array("tokenizer.ggml.token_type", v.types);
  out.add_string_array("tokenizer.ggml.merges", v.merges);
  for (const auto& [kind, id] : v.special_ids) out.add_u32(kKeys.at(kind), static_cast<uint32_t>(id));
  out.add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  if (v.chat_template) out.add_string("tokenizer.chat_template", *v.chat_template);
}

}  // namespace hyllm::gguf
