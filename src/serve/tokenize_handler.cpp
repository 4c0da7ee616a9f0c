// POST /tokenize and /detokenize, and GET /v1/models.

#include "serve/api_error.h"
#include "serve/chat_prompt.h"
#include "serve/chat_request.h"
#include "serve/handlers.h"
#include "serve/limits.h"

namespace hyllm::serve {

void handle_tokenize(const ServingContext& ctx, const std::string& body, httplib::Response& res) {
  Json j = parse_request_json(body);
  FieldReader r(j);
  ctx.check_model(r.string("model"));
  const Tokenizer& tok = ctx.require_tokenizer(r.has("messages") ? "messages" : "prompt");
  std::vector<int32_t> ids;
  if (const auto* messages = r.get("messages")) {
    Json normalized = normalize_messages(*messages);
    Json tools = validate_tools(r.array("tools"), nullptr);
    Json kwargs = template_kwargs(r.object("chat_template_kwargs"));
    auto request_template = r.string("chat_template");
    ChatPromptInputs in;
    in.messages = &normalized;
    in.tools = &tools;
    in.add_generation_prompt = r.boolean("add_generation_prompt").value_or(true);
    in.continue_final_message = r.boolean("continue_final_message").value_or(false);
    if (in.add_generation_prompt && in.continue_final_message) {
      throw bad_request("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                        "continue_final_message");
    }
    in.request_kwargs = &kwargs;
    in.request_template = &request_template;
    in.add_special_tokens = r.boolean("add_special_tokens").value_or(false);
    ids = chat_prompt_ids(ctx, in);
  } else {
    auto prompt = r.string("prompt");
    if (!prompt) throw bad_request("Either `prompt` or `messages` is required", "prompt");
    ids = tok.encode(*prompt, r.boolean("add_special_tokens").value_or(true));
  }
  Json out;
  out["count"] = ids.size();
  out["max_model_len"] = ctx.max_model_len;
  out["tokens"] = ids;
  if (r.boolean("return_token_strs").value_or(false)) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(tok.id_to_token(id));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  write_json(res, 200, out);
}

void handle_detokenize(const ServingContext& ctx, const std::string& body, httplib::Response& res) {
  Json j = parse_request_json(body);
  FieldReader r(j);
  ctx.check_model(r.string("model"));
  const Tokenizer& tok = ctx.require_tokenizer("tokens");
  if (!r.has("tokens")) throw bad_request("`tokens` is required", "tokens");
  auto ids = r.int_list("tokens", kMaxRequestBodyBytes);
  check_token_ids(ids, tok.vocab_size(), "tokens");
  write_json(res, 200, Json{{"prompt", tok.decode(ids, false)}});
}

Json models_json(const ServingContext& ctx) {
  Json data = Json::array();
  for (const auto& name : ctx.served_model_names) {
    Json m;
    m["id"] = name;
    m["object"] = "model";
    m["created"] = ctx.created;
    m["owned_by"] = "hyllm";
    m["root"] = ctx.model_root;
    m["parent"] = nullptr;
    m["max_model_len"] = ctx.max_model_len;
    data.push_back(std::move(m));
  }
  return Json{{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace hyllm::serve
