#include "serve/chat_prompt.h"

#include <fmt/format.h>

#include <cstdlib>
#include <random>

#include "serve/api_error.h"

namespace hyllm::serve {
namespace {

const ChatTemplate& pick_template(const ServingContext& ctx, const ChatPromptInputs& in,
                                  std::optional<ChatTemplate>& request_template) {
  if (in.request_template && *in.request_template) {
    if (!ctx.trust_request_chat_template) {
      throw bad_request(
          "Chat template is passed with request, but --trust-request-chat-template is not set. Refused request "
          "with untrusted chat template.",
          "chat_template");
    }
    try {
      request_template.emplace(ChatTemplate::from_source(**in.request_template));
    } catch (const Error& e) {
      throw bad_request(fmt::format("chat_template does not parse: {}", e.what()), "chat_template");
    }
    return *request_template;
  }
  if (!ctx.chat_template) {
    throw bad_request("The model has no chat template; start the server with --chat-template", "messages");
  }
  return *ctx.chat_template;
}

bool spells_special_token(const std::string& text, const std::vector<std::string>& specials) {
  for (const auto& s : specials) {
    if (text.find(s) != std::string::npos) return true;
  }
  return false;
}

// Placeholders are framed by U+E000 (private use: no template trims it as
// whitespace) and carry a random nonce per request, so no client can forge one.
constexpr std::string_view kMark = "\xee\x80\x80";

std::string placeholder_prefix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}hyllm-{:016x}-", kMark, rng());
}

}  // namespace

std::vector<std::string> special_token_texts(const Tokenizer& tokenizer) {
  std::vector<std::string> out;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) {
      std::string text = tokenizer.id_to_token(id);
      if (!text.empty()) out.push_back(std::move(text));
    }
  }
  return out;
}

std::vector<int32_t> chat_prompt_ids(const ServingContext& ctx, const ChatPromptInputs& in) {
  std::optional<ChatTemplate> request_template;
  const ChatTemplate& tmpl = pick_template(ctx, in, request_template);
  const Tokenizer& tok = ctx.require_tokenizer("messages");

  ChatTemplateInputs inputs;
  inputs.messages = *in.messages;
  // Client text that spells special tokens is swapped for placeholders.
  std::vector<std::string> protected_texts;
  std::string prefix;
  for (auto& message : inputs.messages) {
    auto& content = message["content"];
    if (!content.is_string() || !spells_special_token(content.get_ref<const std::string&>(), ctx.special_tokens)) {
      continue;
    }
    if (prefix.empty()) prefix = placeholder_prefix();
    protected_texts.push_back(content.get<std::string>());
    content = fmt::format("{}{}{}", prefix, protected_texts.size() - 1, kMark);
  }
  if (in.tools && !in.tools->is_null()) inputs.tools = *in.tools;
  inputs.add_generation_prompt = in.add_generation_prompt && !in.continue_final_message;
  inputs.extra_context =
      ctx.default_chat_template_kwargs.is_object() ? ctx.default_chat_template_kwargs : Json::object();
  if (in.request_kwargs) {
    for (const auto& [key, value] : in.request_kwargs->items()) inputs.extra_context[key] = value;
  }
  if (const auto& bos = tok.bos_token()) inputs.bos_token = *bos;
  if (const auto& eos = tok.eos_token()) inputs.eos_token = *eos;

  std::string prompt;
  try {
    prompt = tmpl.render(inputs);
  } catch (const Error& e) {
    throw bad_request(fmt::format("The chat template failed on these messages: {}", e.what()), "messages");
  }
  if (in.continue_final_message) {
    const Json& last = inputs.messages.back()["content"];
    std::string content = last.is_string() ? last.get<std::string>() : std::string();
    size_t at = content.empty() ? std::string::npos : prompt.rfind(content);
    if (at == std::string::npos) {
      throw bad_request(
          "continue_final_message is set but the final message does not appear in the chat after applying the "
          "chat template",
          "continue_final_message");
    }
    prompt.resize(at + content.size());
  }
  if (protected_texts.empty()) return tok.encode(prompt, in.add_special_tokens);

  // The template's text may hold control tokens; the client's may not.
  std::vector<int32_t> ids;
  auto append = [&](const std::vector<int32_t>& more) { ids.insert(ids.end(), more.begin(), more.end()); };
  if (in.add_special_tokens) append(tok.encode("", true));
  size_t pos = 0;
  while (pos < prompt.size()) {
    size_t at = prompt.find(prefix, pos);
    if (at == std::string::npos) {
      append(tok.encode(std::string_view(prompt).substr(pos), false));
      break;
    }
    if (at > pos) append(tok.encode(std::string_view(prompt).substr(pos, at - pos), false));
    size_t index_start = at + prefix.size();
    size_t end = prompt.find(kMark, index_start);
    size_t index = protected_texts.size();
    if (end != std::string::npos && end > index_start && end - index_start < 8) {
      index = static_cast<size_t>(std::strtoul(prompt.c_str() + index_start, nullptr, 10));
    }
    if (index >= protected_texts.size()) {
      // The template altered the placeholder: what is left is template text.
      append(tok.encode(std::string_view(prompt).substr(at), false));
      break;
    }
    append(tok.encode(protected_texts[index], false, /*split_special_tokens=*/true));
    pos = end + kMark.size();
  }
  return ids;
}

}  // namespace hyllm::serve
