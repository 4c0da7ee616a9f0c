#pragma once
// --speculative-config: vLLM's JSON object, e.g.
//   --speculative-config '{"method": "mtp", "num_speculative_tokens": 2}'
// hyllm drafts with the checkpoint's own multi-token-prediction head only:
// method "mtp" (vLLM also names it "qwen3_next_mtp"; both are accepted),
// num_speculative_tokens 1..4. Other vLLM keys (a separate draft model,
// draft parallelism, tree or n-gram methods) are refused by name rather
// than ignored.

#include <string_view>

namespace hyllm {

inline constexpr int kMaxSpeculativeTokens = 4;

struct SpeculativeConfig {
  int num_speculative_tokens = 0;  // 0: no speculative decoding
};

// Throws Error(kInvalidArgument) naming the problem (malformed JSON, a
// missing or unknown key, a value out of range).
SpeculativeConfig parse_speculative_config(std::string_view json_text);

}  // namespace hyllm
