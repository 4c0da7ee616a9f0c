#include "text/detokenizer.h"

#include "text/tokenizer/tokenizer_impl.h"
#include "text/tokenizer/utf8.h"

namespace hyllm {

using tokenizer_detail::append_utf8_lossy;
using tokenizer_detail::incomplete_utf8_suffix;

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : impl_(&tokenizer.impl()),
      skip_special_(skip_special_tokens),
      byte_level_(tokenizer.impl().byte_level_decode) {}

std::string IncrementalDetokenizer::push(std::span<const int32_t> new_ids) {
  const auto& impl = *impl_;
  std::string out;
  if (byte_level_) {
    // ByteLevel decoding is the lossy UTF-8 reading of the tokens' bytes
    // concatenated; cutting before an incomplete sequence at the end gives
    // the same reading piecewise, since such a cut starts at a lead byte.
    for (int32_t id : new_ids) {
      if (id < 0 || id >= impl.vocab_size) continue;
      if (skip_special_ && impl.special[id]) continue;
      pending_.append(impl.token_bytes(id));
    }
    const size_t hold = incomplete_utf8_suffix(pending_);
    append_utf8_lossy(out, std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
    return out;
  }
  // Other decoders may look at neighbouring tokens: decode everything again
  // and emit the new tail, holding back a trailing U+FFFD that more byte
  // tokens could still complete.
  ids_.insert(ids_.end(), new_ids.begin(), new_ids.end());
  const std::string full = impl.decode(ids_, skip_special_);
  if (full.compare(0, emitted_.size(), emitted_) != 0) return out;
  std::string_view tail = std::string_view(full).substr(emitted_.size());
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  while (tail.size() >= 3 && tail.substr(tail.size() - 3) == kReplacement) tail.remove_suffix(3);
  out.assign(tail);
  emitted_ += out;
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out;
  if (byte_level_) {
    append_utf8_lossy(out, pending_);
    pending_.clear();
    return out;
  }
  const std::string full = impl_->decode(ids_, skip_special_);
  if (full.size() > emitted_.size() && full.compare(0, emitted_.size(), emitted_) == 0) {
    out = full.substr(emitted_.size());
  }
  emitted_ += out;
  return out;
}

size_t IncrementalDetokenizer::pending_bytes() const { return pending_.size(); }

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_in_output)
    : include_stop_(include_stop_in_output) {
  for (auto& s : stop_strings) {
    max_len_ = std::max(max_len_, s.size());
    stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Step StopStringMatcher::push(std::string_view delta) {
  Step step;
  if (stopped_) return step;
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(delta);
  // The earliest completed stop string wins (the first listed on a tie).
  size_t best_pos = std::string::npos;
  size_t best_index = 0;
  for (size_t k = 0; k < stops_.size(); ++k) {
    if (stops_[k].empty()) continue;
    const size_t pos = buf.find(stops_[k]);
    if (pos < best_pos) {
      best_pos = pos;
      best_index = k;
    }
  }
  if (best_pos != std::string::npos) {
    stopped_ = true;
    step.stopped = true;
    step.stop_index = best_index;
    step.text = buf.substr(0, best_pos + (include_stop_ ? stops_[best_index].size() : 0));
    return step;
  }
  // Hold back the longest tail that is a proper prefix of a stop string.
  size_t hold = 0;
  const size_t limit = std::min(buf.size(), max_len_ == 0 ? 0 : max_len_ - 1);
  for (size_t k = limit; k > 0 && hold == 0; --k) {
    const std::string_view tail = std::string_view(buf).substr(buf.size() - k);
    for (const auto& s : stops_) {
      if (s.size() > k && std::string_view(s).substr(0, k) == tail) {
        hold = k;
        break;
      }
    }
  }
  held_ = buf.substr(buf.size() - hold);
  buf.resize(buf.size() - hold);
  step.text = std::move(buf);
  return step;
}

std::string StopStringMatcher::finish() {
  if (stopped_) return {};
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace hyllm
