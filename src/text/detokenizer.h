#pragma once
// Streaming text out of generated token ids, and stop strings that may span
// token boundaries (vLLM semantics: the output ends before the stop string).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace hyllm {

// Turns ids into text as they arrive. push() returns only text that later ids
// cannot change: an incomplete UTF-8 sequence at the end is held back (never
// split). Invariant: the concatenation of every push() and finish() equals
// tokenizer.decode(all ids, skip_special_tokens). The Tokenizer must outlive
// this object (moving the Tokenizer is fine).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  std::string push(std::span<const int32_t> new_ids);
  std::string push(int32_t id) { return push(std::span<const int32_t>(&id, 1)); }
  // Flushes what is held back (an incomplete sequence becomes U+FFFD, as in
  // a full decode).
  std::string finish();

  // Bytes held back because they may be the start of a UTF-8 sequence.
  size_t pending_bytes() const;

 private:
  const tokenizer_detail::TokenizerImpl* impl_;
  bool skip_special_;
  bool byte_level_;            // decoder is token-local over bytes: fast path
  std::string pending_;        // byte path: undecided trailing bytes
  std::vector<int32_t> ids_;   // generic path: every id so far
  std::string emitted_;        // generic path: what was returned so far
};

// Watches generated text for stop strings. Feed it the deltas (for instance
// from IncrementalDetokenizer); it returns what may be shown now, holding back
// a tail that could still become the start of a stop string.
class StopStringMatcher {
 public:
  // Empty stop strings are ignored. include_stop_in_output: vLLM's
  // include_stop_str_in_output (the stop string itself is emitted too).
  explicit StopStringMatcher(std::vector<std::string> stop_strings,
                             bool include_stop_in_output = false);

  struct Step {
    std::string text;                 // to emit now
    bool stopped = false;             // a stop string completed: generation ends
    std::optional<size_t> stop_index; // which stop string (index into the list)
  };

  // Once stopped, further pushes return nothing.
  Step push(std::string_view delta);
  // Generation ended for another reason: releases the held-back tail.
  std::string finish();

  bool stopped() const { return stopped_; }
  const std::vector<std::string>& stop_strings() const { return stops_; }
  // The longest any stop string is: callers may size buffers with it.
  size_t max_stop_length() const { return max_len_; }

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  size_t max_len_ = 0;
  bool stopped_ = false;
  std::string held_;
};

}  // namespace hyllm
