#pragma once
// A chat request turned into a running generation: the prompt rendered
// through the chat template, how the output is read (reasoning, tool calls),
// what it is held to (structured output, forced tool calls), the sampling
// parameters resolved against the model, and the engine request submitted.
// Shared by /v1/chat/completions and /v1/responses, which differ only in the
// shapes of their requests and responses.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/chat_output.h"
#include "serve/chat_prompt.h"
#include "serve/chat_request.h"
#include "serve/generation.h"
#include "serve/serving_context.h"

namespace hyllm::serve {

struct ChatGeneration {
  std::vector<int32_t> prompt_ids;
  ChatOutputOptions parsing;     // how the choices' text is split
  SamplingParams params;         // as submitted (resolved defaults, max_tokens)
  std::unique_ptr<Generation> generation;
};

// The chat template's inputs for a parsed request (pointers into `req`).
ChatPromptInputs chat_prompt_inputs(const ChatRequest& req);

// Throws ApiError for a request the server cannot run (a template failure,
// a tool choice the server's flags do not allow, a grammar that does not
// compile, a prompt over the context). `id` names the engine request.
ChatGeneration start_chat_generation(const ServingContext& ctx, const ChatRequest& req, const std::string& id);

}  // namespace hyllm::serve
