// hyllm::Tokenizer: the public face of TokenizerImpl.

#include "text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "text/tokenizer/tokenizer_impl.h"
#include "util/status.h"

namespace hyllm {
namespace {

using tokenizer_detail::TokenizerImpl;

// Tokenizer files are tens of MB at most; anything this large is not one.
constexpr std::uintmax_t kMaxFileBytes = 1ull << 30;

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail(ErrorCode::kNotFound, "tokenizer file {} does not exist", path.string());
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail(ErrorCode::kIo, "cannot stat {}: {}", path.string(), ec.message());
  if (size > kMaxFileBytes) fail(ErrorCode::kCorruptData, "{} is too large for a tokenizer file", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kIo, "cannot open {}", path.string());
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) fail(ErrorCode::kIo, "cannot read {}", path.string());
  return text;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json_string(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  auto impl = std::make_unique<TokenizerImpl>();
  impl->load(tokenizer_json, tokenizer_config_json);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json_file(const std::filesystem::path& tokenizer_json,
                                    const std::filesystem::path& tokenizer_config_json) {
  const std::string json = read_file(tokenizer_json);
  const std::string config = tokenizer_config_json.empty() ? std::string() : read_file(tokenizer_config_json);
  return from_json_string(json, config);
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    fail(ErrorCode::kNotFound, "tokenizer directory {} {}", dir.string(),
         std::filesystem::exists(dir, ec) ? "is not a directory" : "does not exist");
  }
  const auto config_path = dir / "tokenizer_config.json";
  Tokenizer t = from_json_file(dir / "tokenizer.json",
                               std::filesystem::exists(config_path, ec) ? config_path : std::filesystem::path());
  auto& config = t.impl_->config;
  // Precedence as in transformers: a chat_template.jinja file overrides the
  // config's template; chat_template.json (processor repos) is a fallback.
  if (const auto jinja = dir / "chat_template.jinja"; std::filesystem::exists(jinja, ec)) {
    config.chat_template = read_file(jinja);
  } else if (const auto tj = dir / "chat_template.json"; !config.chat_template && std::filesystem::exists(tj, ec)) {
    const std::string text = read_file(tj);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail(ErrorCode::kCorruptData, "{} is not valid JSON: {}", tj.string(), e.what());
    }
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string()) {
      config.chat_template = j["chat_template"].get<std::string>();
    }
  }
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       bool split_special_tokens) const {
  std::vector<int32_t> ids;
  impl_->encode(text, add_special_tokens, split_special_tokens, ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const auto s = impl_->token_string(id);
  return s ? std::string(*s) : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->special[id];
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->added_index[id] >= 0;
}

std::string Tokenizer::token_bytes(int32_t id) const { return std::string(impl_->token_bytes(id)); }

const std::optional<std::string>& Tokenizer::bos_token() const { return impl_->config.bos_token; }
const std::optional<std::string>& Tokenizer::eos_token() const { return impl_->config.eos_token; }
const std::optional<std::string>& Tokenizer::pad_token() const { return impl_->config.pad_token; }
const std::optional<std::string>& Tokenizer::unk_token() const { return impl_->config.unk_token; }

namespace {
std::optional<int32_t> lookup(const Tokenizer& t, const std::optional<std::string>& token) {
  if (!token) return std::nullopt;
  return t.token_to_id(*token);
}
}  // namespace

std::optional<int32_t> Tokenizer::bos_token_id() const { return lookup(*this, bos_token()); }
std::optional<int32_t> Tokenizer::eos_token_id() const { return lookup(*this, eos_token()); }
std::optional<int32_t> Tokenizer::pad_token_id() const { return lookup(*this, pad_token()); }
std::optional<int32_t> Tokenizer::unk_token_id() const { return lookup(*this, unk_token()); }
std::optional<bool> Tokenizer::add_bos_token() const { return impl_->config.add_bos_token; }
std::optional<bool> Tokenizer::add_eos_token() const { return impl_->config.add_eos_token; }

const std::string* Tokenizer::chat_template_source() const {
  const auto& t = impl_->config.chat_template;
  return t ? &*t : nullptr;
}

const std::string* Tokenizer::chat_template_source(std::string_view name) const {
  const auto& named = impl_->config.named_chat_templates;
  auto it = named.find(name);
  return it == named.end() ? nullptr : &it->second;
}

const std::vector<std::string>& Tokenizer::load_warnings() const { return impl_->warnings; }

const std::string& Tokenizer::tokenizer_config_text() const { return impl_->config.text; }

}  // namespace hyllm
