#pragma once
// A multi-turn chat workload: each conversation sends its turns one after
// another, and a turn's prompt is everything before it (an optional shared
// system prompt, the earlier user messages and the server's answers) plus a
// new random user message. The load a prefix cache is for: every turn but
// the first repeats the conversation so far. Conversations run side by side,
// at most max_concurrency at once.
//
// Completions endpoint: the parts joined by blank lines in one prompt text;
// chat endpoint: system, user and assistant messages.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/endpoint_client.h"
#include "bench/load_generator.h"
#include "bench/random_dataset.h"

namespace hyllm::bench {

struct MultiTurnOptions {
  int num_conversations = 16;  // --num-prompts
  int num_turns = 5;           // --multi-turn-num-turns
  int prefix_len = 0;          // --multi-turn-prefix-len: a system prompt all conversations share
  int input_len = 128;         // --multi-turn-input-len: tokens of each new user message
  int output_len = 128;        // --multi-turn-output-len
  uint64_t seed = 0;
};

struct Conversation {
  std::string system;                      // empty: none
  std::vector<std::string> user_messages;  // one per turn
  int system_len = 0, user_len = 0, output_len = 0;
};

std::vector<Conversation> make_multi_turn_conversations(const PromptTokenizer& tok, const MultiTurnOptions& opt);

// The request of turn `turn` (0-based) after the answers of the turns before it.
RequestInput multi_turn_request(const RequestInput& base, EndpointKind kind, const Conversation& c, int turn,
                                const std::vector<std::string>& answers);

// Every turn's result, conversation after conversation; a turn after a failed
// one fails without being sent.
LoadRun run_multi_turn(const std::vector<Conversation>& conversations, const RequestInput& base, EndpointKind kind,
                       std::optional<int> max_concurrency, const SendFn& send);

}  // namespace hyllm::bench
