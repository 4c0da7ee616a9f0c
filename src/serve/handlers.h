#pragma once
// The endpoint handlers. Each parses and validates its body, throws ApiError
// for anything wrong (the router turns it into the OpenAI error shape), and
// writes its response.

#include <httplib.h>

#include <string>

#include "serve/json.h"
#include "serve/response_writer.h"
#include "serve/serving_context.h"

namespace hyllm::serve {

void handle_completions(const ServingContext& ctx, ActivityCounter& activity, const std::string& body,
                        httplib::Response& res);
void handle_chat_completions(const ServingContext& ctx, ActivityCounter& activity, const std::string& body,
                             httplib::Response& res);
void handle_responses(const ServingContext& ctx, ActivityCounter& activity, const std::string& body,
                      httplib::Response& res);
void handle_tokenize(const ServingContext& ctx, const std::string& body, httplib::Response& res);
void handle_detokenize(const ServingContext& ctx, const std::string& body, httplib::Response& res);
Json models_json(const ServingContext& ctx);

// --enable-log-requests: one line per engine request with its parameters.
void log_request(const ServingContext& ctx, const std::string& id, size_t prompt_tokens, const SamplingParams& p);

// Prompt ids checked against the vocabulary (400 naming the id).
void check_token_ids(const std::vector<int32_t>& ids, int32_t vocab_size, const char* param);

}  // namespace hyllm::serve
