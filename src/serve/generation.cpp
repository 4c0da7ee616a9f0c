#include "serve/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

#include "util/status.h"

namespace hyllm::serve {
namespace {

using Clock = std::chrono::steady_clock;

// How long to wait on one prompt's stream before looking at the others.
constexpr std::chrono::milliseconds kMultiplexSlice{2};

}  // namespace

Generation::Generation(EngineClient& engine, const Tokenizer* tokenizer, std::string request_id, int n,
                       std::vector<std::string> stop, GenerationOptions options)
    : engine_(engine),
      tokenizer_(tokenizer),
      request_id_(std::move(request_id)),
      n_(n),
      stop_(std::move(stop)),
      options_(std::move(options)) {}

Generation::~Generation() { abort(); }

void Generation::add_prompt(std::vector<int32_t> prompt_token_ids, SamplingParams sampling,
                            std::vector<std::shared_ptr<TokenConstraint>> constraints) {
  HYLLM_CHECK(sampling.n == n_ && sampling.stop == stop_, "prompts of one request share n and stop");
  Prompt p;
  p.ids = std::move(prompt_token_ids);
  p.text = std::make_shared<RequestText>(tokenizer_, n_, options_.skip_special_tokens, stop_,
                                         options_.include_stop_str_in_output);
  EngineRequest r;
  r.request_id = fmt::format("{}-{}", request_id_, prompts_.size());
  r.prompt_token_ids = p.ids;
  p.wants_prompt_logprobs = sampling.prompt_logprobs.has_value();
  r.sampling = std::move(sampling);
  r.constraints = std::move(constraints);
  r.cache_salt = options_.cache_salt;
  // With stop strings the engine detokenizes through the hook, so that a
  // match ends the request in the step that produced it.
  if (!stop_.empty()) r.stop_hook = p.text;
  p.stream = engine_.submit(std::move(r));
  prompts_.push_back(std::move(p));
  choices_.resize(prompts_.size() * static_cast<size_t>(n_));
  ++unfinished_;
}

void Generation::abort() {
  for (auto& p : prompts_) {
    if (!p.ended && p.stream) engine_.abort(p.stream->request_id());
  }
}

std::vector<ChoiceEvent> Generation::next(std::chrono::milliseconds timeout) {
  std::vector<ChoiceEvent> events;
  if (done()) return events;
  std::vector<size_t> live;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    if (!prompts_[i].ended) live.push_back(i);
  }
  if (live.size() == 1) {
    if (auto out = prompts_[live[0]].stream->next(timeout)) handle(live[0], std::move(*out), events);
    return events;
  }
  // Several prompts: take whichever has news, starting after the last one
  // served so that no prompt starves.
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    for (size_t k = 0; k < live.size(); ++k) {
      size_t idx = live[(cursor_ + k) % live.size()];
      if (auto out = prompts_[idx].stream->next(std::chrono::milliseconds(0))) {
        cursor_ = (cursor_ + k + 1) % live.size();
        handle(idx, std::move(*out), events);
        return events;
      }
    }
    auto now = Clock::now();
    if (now >= deadline) return events;
    size_t idx = live[cursor_ % live.size()];
    cursor_ = (cursor_ + 1) % live.size();
    auto wait = std::min<std::chrono::milliseconds>(
        kMultiplexSlice, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) + std::chrono::milliseconds(1));
    if (auto out = prompts_[idx].stream->next(wait)) {
      handle(idx, std::move(*out), events);
      return events;
    }
  }
}

std::optional<ApiError> Generation::error() const {
  if (error_.empty()) return std::nullopt;
  return ApiError(error_status_, error_);
}

void Generation::handle(size_t prompt, RequestOutput out, std::vector<ChoiceEvent>& events) {
  Prompt& p = prompts_[prompt];
  if (!out.error_message.empty()) {
    error_ = out.error_message;
    error_status_ = out.error_status;
  }
  p.num_cached_tokens = out.num_cached_tokens;
  // The engine sends them with the request's first tokens (empty for a one-token prompt).
  const bool has_tokens = std::any_of(out.outputs.begin(), out.outputs.end(),
                                      [](const CompletionOutput& c) { return !c.new_token_ids.empty(); });
  if (p.wants_prompt_logprobs && !p.prompt_logprobs && has_tokens) {
    p.prompt_logprobs = std::make_shared<const std::vector<TokenLogprob>>(std::move(out.prompt_logprobs));
  }
  const size_t base = prompt * static_cast<size_t>(n_);
  for (CompletionOutput& c : out.outputs) {
    ChoiceState& st = choices_.at(base + static_cast<size_t>(c.index));
    ChoiceText& text = p.text->choice(c.index);
    ChoiceEvent ev;
    ev.index = static_cast<int>(base) + c.index;
    ev.first = !st.started;
    if (ev.first) ev.prompt_logprobs = p.prompt_logprobs;
    ev.text_offset = st.chars;
    ev.finish_reason = c.finish_reason;
    ev.stop_reason = c.stop_reason;
    std::span<const int32_t> ids = c.new_token_ids;
    // An EOS or stop token ends the choice without showing its text, unless
    // the request asked for the stop in the output (vLLM).
    const bool ended_by_token =
        c.finish_reason == FinishReason::kStop && !std::holds_alternative<std::string>(c.stop_reason) && !ids.empty();
    if (stop_.empty()) {
      auto shown = ended_by_token && !options_.include_stop_str_in_output ? ids.first(ids.size() - 1) : ids;
      ev.text = text.push(shown).text;
    } else {
      ev.text = std::move(c.text);
      if (ended_by_token && options_.include_stop_str_in_output) ev.text += text.push(ids.last(1)).text;
    }
    if (c.finished() && !std::holds_alternative<std::string>(c.stop_reason)) ev.text += text.finish();
    ev.token_ids = std::move(c.new_token_ids);
    ev.logprobs = std::move(c.logprobs);
    st.started = true;
    st.chars += utf8_length(ev.text);
    st.tokens = c.num_output_tokens;
    st.finished = st.finished || c.finished();
    events.push_back(std::move(ev));
  }
  if (out.finished) {
    p.ended = true;
    --unfinished_;
    // A request that failed as a whole may end choices that never reported.
    for (int i = 0; i < n_; ++i) {
      ChoiceState& st = choices_[base + static_cast<size_t>(i)];
      if (st.finished) continue;
      ChoiceEvent ev;
      ev.index = static_cast<int>(base) + i;
      ev.first = !st.started;
      ev.text_offset = st.chars;
      ev.finish_reason = out.error_message.empty() ? FinishReason::kAbort : FinishReason::kError;
      st.started = st.finished = true;
      events.push_back(std::move(ev));
    }
  }
}

Usage Generation::usage() const {
  Usage u;
  int64_t cached = 0;
  for (const auto& p : prompts_) {
    u.prompt_tokens += static_cast<int64_t>(p.ids.size());
    cached += p.num_cached_tokens;
  }
  for (const auto& c : choices_) u.completion_tokens += c.tokens;
  if (cached > 0) u.cached_tokens = cached;
  return u;
}

}  // namespace hyllm::serve
