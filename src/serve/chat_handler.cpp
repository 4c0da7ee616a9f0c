// POST /v1/chat/completions.

#include "serve/chat_generation.h"
#include "serve/chat_request.h"
#include "serve/handlers.h"
#include "serve/openai_json.h"

namespace hyllm::serve {

void handle_chat_completions(const ServingContext& ctx, ActivityCounter& activity, const std::string& body,
                             httplib::Response& res) {
  auto guard = activity.enter();
  ChatRequest req = parse_chat_request(parse_request_json(body));
  ctx.check_model(req.model);
  warn_ignored_fields(req.sampling);
  const Tokenizer& tok = ctx.require_tokenizer("messages");

  // vLLM's chat echo: the final message's content comes back in front of the
  // reply when that message is the assistant's.
  std::string echo;
  if (req.echo) {
    const Json& last = req.messages.back();
    if (last["role"] == "assistant" && last["content"].is_string()) echo = last["content"].get<std::string>();
  }

  const std::string id = make_request_id("chatcmpl-");
  ChatGeneration chat = start_chat_generation(ctx, req, id);

  auto formatter = make_chat_formatter(response_options(id, ctx.model_name(), req.sampling), tok, std::move(echo),
                                       std::move(chat.prompt_ids), std::move(chat.parsing));
  if (req.sampling.stream) {
    respond_stream(res, std::move(chat.generation), std::move(formatter), std::move(guard));
  } else {
    respond_whole(res, *chat.generation, *formatter);
  }
}

}  // namespace hyllm::serve
