// POST /v1/responses: chat under the Responses API's request and response
// shapes (responses_request.h, responses_output.h).

#include <fmt/format.h>

#include <string>

#include "serve/chat_generation.h"
#include "serve/handlers.h"
#include "serve/openai_json.h"
#include "serve/responses_output.h"
#include "serve/responses_request.h"

namespace hyllm::serve {
namespace {

// A float sampling value as the client wrote it (0.8, not 0.800000011920929).
double shortest(float value) { return std::stod(fmt::format("{}", value)); }

}  // namespace

void handle_responses(const ServingContext& ctx, ActivityCounter& activity, const std::string& body,
                      httplib::Response& res) {
  auto guard = activity.enter();
  ResponsesRequest req = parse_responses_request(parse_request_json(body));
  ctx.check_model(req.chat.model);
  warn_ignored_fields(req.chat.sampling);
  const Tokenizer& tok = ctx.require_tokenizer("input");

  const std::string id = make_request_id("resp_");
  ChatGeneration chat = start_chat_generation(ctx, req.chat, id);

  ResponsesShape shape;
  shape.echo = std::move(req.echo);
  shape.echo["temperature"] = shortest(chat.params.temperature);
  shape.echo["top_p"] = shortest(chat.params.top_p);
  shape.echo["max_output_tokens"] = chat.params.max_tokens;
  if (chat.parsing.reasoning) {
    shape.reasoning_open = tok.token_to_id(chat.parsing.reasoning->open);
    shape.reasoning_close = tok.token_to_id(chat.parsing.reasoning->close);
    shape.starts_in_reasoning = chat.parsing.reasoning_start == ReasoningStart::kReasoning;
  }

  ResponseOptions options;
  options.id = id;
  options.created = unix_time_seconds();
  options.model = ctx.model_name();
  auto formatter = make_responses_formatter(std::move(options), tok, std::move(chat.parsing), std::move(shape));
  if (req.chat.sampling.stream) {
    respond_stream(res, std::move(chat.generation), std::move(formatter), std::move(guard));
  } else {
    respond_whole(res, *chat.generation, *formatter);
  }
}

}  // namespace hyllm::serve
