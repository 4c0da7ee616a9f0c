#include "serve/response_format.h"

#include <fmt/format.h>

#include <variant>

#include "serve/api_error.h"
#include "serve/sse.h"

namespace hyllm::serve {

ResponseOptions response_options(std::string id, std::string model, const SamplingRequest& sampling) {
  ResponseOptions options;
  options.id = std::move(id);
  options.created = unix_time_seconds();
  options.model = std::move(model);
  options.logprobs = sampling.logprobs;
  options.prompt_logprobs = prompt_logprobs_shown(sampling.prompt_logprobs);
  options.include_usage = sampling.include_usage;
  options.continuous_usage = sampling.continuous_usage_stats;
  options.return_token_ids = sampling.return_token_ids;
  options.tokens_as_token_ids = sampling.return_tokens_as_token_ids;
  return options;
}

std::string TokenizerText::text(int32_t token) const {
  if (spell_ids_) return fmt::format("token_id:{}", token);
  const int32_t one[] = {token};
  return tokenizer_->decode(one, false);
}

std::string TokenizerText::bytes(int32_t token) const {
  return tokenizer_ ? tokenizer_->token_bytes(token) : text(token);
}

void ChoiceResult::add(ChoiceEvent&& ev) {
  text += ev.text;
  token_ids.insert(token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
  for (auto& lp : ev.logprobs) logprobs.push_back(std::move(lp));
  if (ev.prompt_logprobs) prompt_logprobs = std::move(ev.prompt_logprobs);
  if (ev.finished()) {
    finish_reason = ev.finish_reason;
    stop_reason = std::move(ev.stop_reason);
  }
}

Json finish_reason_json(FinishReason reason) {
  if (reason == FinishReason::kNone) return nullptr;
  return std::string(finish_reason_name(reason));
}

Json stop_reason_json(const StopReason& reason) {
  if (const auto* id = std::get_if<int32_t>(&reason)) return *id;
  if (const auto* s = std::get_if<std::string>(&reason)) return *s;
  return nullptr;
}

Json ResponseFormatter::chunk_header(const char* object) const {
  Json j;
  j["id"] = options_.id;
  j["object"] = object;
  j["created"] = options_.created;
  j["model"] = options_.model;
  return j;
}

void ResponseFormatter::add_chunk_usage(Json& chunk, const Usage& usage) const {
  if (options_.continuous_usage) {
    chunk["usage"] = usage_json(usage);
  } else if (options_.include_usage) {
    chunk["usage"] = nullptr;
  }
}

std::string ResponseFormatter::sse(const Json& payload) const { return sse_event(payload); }

std::string ResponseFormatter::stream_tail(const Usage& usage, const std::optional<ApiError>& error) {
  std::string tail;
  if (error) tail += sse_error(*error);
  if (options_.include_usage) tail += sse_event(usage_chunk(usage));
  tail += sse_done();
  return tail;
}

Json ResponseFormatter::usage_chunk(const Usage& usage) const {
  Json j = chunk_header(chunk_object());
  j["choices"] = Json::array();
  j["usage"] = usage_json(usage);
  return j;
}

}  // namespace hyllm::serve
