// Building a TokenizerImpl from tokenizer.json and tokenizer_config.json.

#include <nlohmann/json.hpp>

#include "text/tokenizer/json_reader.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/utf8.h"
#include "text/tokenizer/tokenizer_impl.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {
namespace {

nlohmann::json parse_json(std::string_view text, std::string_view what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "{} is not valid JSON: {}", what, e.what());
  }
}

const nlohmann::json& field_or_null(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// A special token in tokenizer_config.json: "text", {"content": "text", ...}
// or null.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key) {
  const auto& v = field_or_null(config, key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    auto it = v.find("content");
    if (it != v.end() && it->is_string()) return it->get<std::string>();
  }
  if (v.is_null()) return std::nullopt;
  fail(ErrorCode::kCorruptData, "tokenizer_config.json: {} is neither a string nor a token object", key);
}

// The byte of a ByteFallback token "<0xXX>", or -1.
int byte_fallback_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (char c : t.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
    else return -1;
  }
  return v;
}

std::optional<bool> config_bool(const nlohmann::json& config, const char* key) {
  const auto& v = field_or_null(config, key);
  if (v.is_boolean()) return v.get<bool>();
  return std::nullopt;
}

}  // namespace

void TokenizerImpl::load(std::string_view tokenizer_json, std::string_view config_json) {
  TokenizerJson parts = read_tokenizer_json(tokenizer_json);
  const nlohmann::json& j = parts.doc;
  if (!j.is_object()) fail(ErrorCode::kCorruptData, "tokenizer.json is not a JSON object");
  if (!j.contains("model")) fail(ErrorCode::kCorruptData, "tokenizer.json has no \"model\"");

  normalizer = parse_normalizer(field_or_null(j, "normalizer"));
  pre_tokenizer = parse_pre_tokenizer(field_or_null(j, "pre_tokenizer"));
  model = std::make_unique<BpeModel>(j["model"], parts, pre_tokenizer && pre_tokenizer->is_byte_level());
  post_processor = parse_post_processor(field_or_null(j, "post_processor"));
  decoder = parse_decoder(field_or_null(j, "decoder"));
  // Serving checks lengths itself and never pads; a file that asks for
  // either still loads, and says so.
  for (const char* key : {"truncation", "padding"}) {
    if (!field_or_null(j, key).is_null()) {
      warnings.push_back(fmt::format("tokenizer.json sets {}; hyllm ignores it", key));
    }
  }
  load_added_tokens(field_or_null(j, "added_tokens"));
  if (post_processor && post_processor->largest_id() >= vocab_size) {
    fail(ErrorCode::kCorruptData, "tokenizer.json: post_processor adds token id {}, outside the vocabulary of {}",
         post_processor->largest_id(), vocab_size);
  }
  build_decode_tables();
  load_config(config_json);
}

void TokenizerImpl::load_added_tokens(const nlohmann::json& list) {
  if (list.is_null()) {
    vocab_size = model->vocab_size();
    added_index.assign(vocab_size, -1);
    return;
  }
  if (!list.is_array()) fail(ErrorCode::kCorruptData, "tokenizer.json: added_tokens is not a list");
  // Ids are assigned as HF's AddedVocabulary::add_tokens does: a token whose
  // content is already known keeps that id, a new one takes the next free id
  // after the model vocabulary (the file's "id" field only draws a warning
  // there, and agrees in every well-formed file).
  const auto model_entries = static_cast<int64_t>(model->vocab_size());
  int64_t max_added = -1;
  for (const auto& item : list) {
    AddedToken t;
    t.content = json_string(item, "content", "added token");
    t.special = json_bool(item, "special", false);
    t.single_word = json_bool(item, "single_word", false);
    t.lstrip = json_bool(item, "lstrip", false);
    t.rstrip = json_bool(item, "rstrip", false);
    t.normalized = json_bool(item, "normalized", !t.special);
    if (t.content.empty()) continue;
    if (find_invalid_utf8(t.content) != std::string_view::npos) {
      fail(ErrorCode::kCorruptData, "tokenizer.json: added token content is not valid UTF-8");
    }
    int64_t id;
    if (auto it = added_ids.find(t.content); it != added_ids.end()) {
      id = it->second;
    } else if (auto mid = model->token_to_id(t.content)) {
      id = *mid;
    } else {
      id = max_added < 0 ? model_entries : std::max(max_added + 1, model_entries);
    }
    if (id > INT32_MAX - 1) fail(ErrorCode::kCorruptData, "tokenizer.json: too many added tokens");
    t.id = static_cast<int32_t>(id);
    max_added = std::max(max_added, id);
    if (auto it = added_ids.find(t.content); it != added_ids.end()) {
      // Same content again: the later entry's flags win, as in HF.
      for (auto& existing : added_tokens) {
        if (existing.content == t.content) existing = t;
      }
    } else {
      added_ids.emplace(t.content, t.id);
      added_tokens.push_back(t);
    }
  }
  int64_t size = model->vocab_size();
  for (const auto& t : added_tokens) size = std::max<int64_t>(size, int64_t{t.id} + 1);
  vocab_size = static_cast<int32_t>(size);
  added_index.assign(vocab_size, -1);
  added_decode_form.clear();
  std::vector<std::pair<std::string, size_t>> raw_patterns, normalized_patterns;
  for (size_t k = 0; k < added_tokens.size(); ++k) {
    const AddedToken& t = added_tokens[k];
    added_index[t.id] = static_cast<int32_t>(k);
    std::string form = t.content;
    if (t.normalized && normalizer) normalizer->normalize(form);
    added_decode_form.push_back(form);
    if (t.normalized) {
      normalized_patterns.emplace_back(form, k);
    } else {
      raw_patterns.emplace_back(t.content, k);
    }
  }
  raw_matcher.build(added_tokens, std::move(raw_patterns));
  normalized_matcher.build(added_tokens, std::move(normalized_patterns));
}

void TokenizerImpl::build_decode_tables() {
  special.assign(vocab_size, 0);
  for (const auto& t : added_tokens) {
    if (t.special) special[t.id] = 1;
  }
  byte_level_decode = decoder && decoder->is_byte_level();
  token_bytes_offset.assign(static_cast<size_t>(vocab_size) + 1, 0);
  all_token_bytes.clear();
  for (int32_t id = 0; id < vocab_size; ++id) {
    token_bytes_offset[id] = static_cast<uint32_t>(all_token_bytes.size());
    const auto s = token_string(id);
    if (!s) continue;
    if (byte_level_decode) {
      all_token_bytes += byte_level_token_bytes(*s);
    } else if (const int byte = byte_fallback_value(*s); byte >= 0 && decoder && decoder->has_byte_fallback()) {
      all_token_bytes += static_cast<char>(byte);  // "<0xE4>" stands for one raw byte
    } else {
      // Other decoders depend on neighbours; a token alone decodes to this.
      const int32_t one[1] = {id};
      all_token_bytes += decode(std::span<const int32_t>(one, 1), false);
    }
  }
  token_bytes_offset[vocab_size] = static_cast<uint32_t>(all_token_bytes.size());
}

void TokenizerImpl::load_config(std::string_view config_json) {
  config = TokenizerConfig{};
  if (config_json.empty()) return;
  config.text = std::string(config_json);
  const nlohmann::json c = parse_json(config_json, "tokenizer_config.json");
  if (!c.is_object()) fail(ErrorCode::kCorruptData, "tokenizer_config.json is not a JSON object");
  config.bos_token = config_token(c, "bos_token");
  config.eos_token = config_token(c, "eos_token");
  config.pad_token = config_token(c, "pad_token");
  config.unk_token = config_token(c, "unk_token");
  config.add_bos_token = config_bool(c, "add_bos_token");
  config.add_eos_token = config_bool(c, "add_eos_token");
  const auto& tpl = field_or_null(c, "chat_template");
  if (tpl.is_string()) {
    config.chat_template = tpl.get<std::string>();
  } else if (tpl.is_array()) {
    for (const auto& entry : tpl) {
      const auto name = entry.is_object() ? entry.find("name") : entry.end();
      const auto text = entry.is_object() ? entry.find("template") : entry.end();
      if (name == entry.end() || text == entry.end() || !name->is_string() || !text->is_string()) {
        fail(ErrorCode::kCorruptData, "tokenizer_config.json: chat_template list entries need name and template");
      }
      config.named_chat_templates[name->get<std::string>()] = text->get<std::string>();
    }
    if (auto it = config.named_chat_templates.find("default"); it != config.named_chat_templates.end()) {
      config.chat_template = it->second;
    }
  } else if (!tpl.is_null()) {
    fail(ErrorCode::kCorruptData, "tokenizer_config.json: chat_template is neither a string nor a list");
  }
}

}  // namespace hyllm::tokenizer_detail
