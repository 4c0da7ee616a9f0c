#pragma once
// Caps on what one request may ask for. Each bounds work or memory that a
// single client could otherwise make unbounded (huge n, giant stop lists,
// endless message lists have each been a denial of service elsewhere).

#include <cstddef>

namespace hyllm::serve {

inline constexpr size_t kMaxRequestBodyBytes = 32u << 20;  // JSON body
inline constexpr size_t kMaxRequestHeadBytes = 64u << 10;  // request line + headers
inline constexpr size_t kMaxHeaderCount = 100;
inline constexpr int kMaxN = 128;                    // choices per prompt
inline constexpr size_t kMaxStopStrings = 32;
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr size_t kMaxStopTokenIds = 1024;
inline constexpr size_t kMaxBadWords = 256;
inline constexpr size_t kMaxLogitBiasEntries = 1024;
inline constexpr size_t kMaxAllowedTokenIds = size_t{1} << 18;  // a whole Qwen vocabulary
inline constexpr size_t kMaxMessages = 4096;
inline constexpr size_t kMaxTools = 512;
inline constexpr size_t kMaxGrammarBytes = 256u << 10;  // a schema, regex, grammar or tag
inline constexpr size_t kMaxPromptsPerRequest = 256;  // batched completion prompts
inline constexpr size_t kMaxChoicesPerRequest = 1024; // prompts x n

}  // namespace hyllm::serve
