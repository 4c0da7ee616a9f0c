#include "serve/choice_text.h"

#include "util/status.h"

namespace hyllm::serve {

ChoiceText::ChoiceText(const Tokenizer* tokenizer, bool skip_special_tokens, const std::vector<std::string>& stop,
                       bool include_stop_in_output) {
  HYLLM_CHECK(tokenizer || stop.empty(), "stop strings need a tokenizer");
  if (tokenizer) detok_.emplace(*tokenizer, skip_special_tokens);
  if (!stop.empty()) matcher_.emplace(stop, include_stop_in_output);
}

ChoiceText::Piece ChoiceText::push(std::span<const int32_t> ids, bool may_stop) {
  Piece piece;
  if (stopped_) return piece;
  std::string text = detok_ ? detok_->push(ids) : std::string();
  if (!matcher_ || !may_stop) {
    piece.text = std::move(text);
    return piece;
  }
  auto step = matcher_->push(text);
  piece.text = std::move(step.text);
  if (step.stopped) {
    stopped_ = true;
    if (step.stop_index) piece.matched_stop = matcher_->stop_strings().at(*step.stop_index);
  }
  return piece;
}

std::string ChoiceText::finish() {
  if (stopped_) return {};
  std::string rest = detok_ ? detok_->finish() : std::string();
  if (!matcher_) return rest;
  auto step = matcher_->push(rest);
  if (step.stopped) {
    stopped_ = true;
    return step.text;
  }
  return step.text + matcher_->finish();
}

RequestText::RequestText(const Tokenizer* tokenizer, int n, bool skip_special_tokens,
                         const std::vector<std::string>& stop, bool include_stop_in_output) {
  choices_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) choices_.emplace_back(tokenizer, skip_special_tokens, stop, include_stop_in_output);
}

StopCheck RequestText::on_tokens(int choice_index, std::span<const int32_t> new_token_ids, bool may_stop) {
  auto piece = choice(choice_index).push(new_token_ids, may_stop);
  StopCheck check;
  check.text = std::move(piece.text);
  check.matched_stop = std::move(piece.matched_stop);
  return check;
}

}  // namespace hyllm::serve
