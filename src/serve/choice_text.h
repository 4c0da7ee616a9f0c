#pragma once
// The text of one choice as the client sees it: generated ids detokenized
// incrementally (an incomplete UTF-8 sequence is held back, never split) and,
// when the request has stop strings, matched against them (a tail that could
// still begin a stop string is held back; the output ends before the stop
// string unless include_stop_str_in_output).
//
// With stop strings this runs on the engine thread, inside the StopStringHook,
// so that a match finishes the request (and frees its cache) in the same
// step; without them it runs on the HTTP thread. Either way one object is
// used by one thread at a time: the engine stops calling the hook before it
// publishes the choice's final output.
//
// Without a tokenizer (--skip-tokenizer-init) nothing is detokenized: the
// text stays empty and the client reads the token ids; stop strings are then
// refused before a request starts.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_client.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"

namespace hyllm::serve {

class ChoiceText {
 public:
  ChoiceText(const Tokenizer* tokenizer, bool skip_special_tokens, const std::vector<std::string>& stop,
             bool include_stop_in_output);

  struct Piece {
    std::string text;                         // to show now
    std::optional<std::string> matched_stop;  // a stop string completed
  };
  // may_stop is false while the choice is within min_tokens: text passes
  // unchecked, as vLLM checks stop strings only after min_tokens.
  Piece push(std::span<const int32_t> ids, bool may_stop = true);
  // The choice ended for a reason other than a stop string: releases what
  // was held back.
  std::string finish();
  bool has_stop_strings() const { return matcher_.has_value(); }

 private:
  std::optional<IncrementalDetokenizer> detok_;  // none without a tokenizer
  std::optional<StopStringMatcher> matcher_;
  bool stopped_ = false;
};

// All choices of one engine request, shared between the engine thread (as the
// request's StopStringHook) and the HTTP thread that reads its outputs.
class RequestText final : public StopStringHook {
 public:
  RequestText(const Tokenizer* tokenizer, int n, bool skip_special_tokens, const std::vector<std::string>& stop,
              bool include_stop_in_output);

  StopCheck on_tokens(int choice_index, std::span<const int32_t> new_token_ids, bool may_stop) override;
  ChoiceText& choice(int index) { return choices_.at(static_cast<size_t>(index)); }

 private:
  std::vector<ChoiceText> choices_;
};

}  // namespace hyllm::serve
