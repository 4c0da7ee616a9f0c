// Encoding and decoding with a loaded TokenizerImpl.

#include "text/tokenizer/tokenizer_impl.h"

#include "text/tokenizer/scratch.h"
#include "text/tokenizer/utf8.h"
#include "util/status.h"

namespace hyllm::tokenizer_detail {

std::optional<std::string_view> TokenizerImpl::token_string(int32_t id) const {
  if (id < 0 || id >= vocab_size) return std::nullopt;
  if (const int32_t k = added_index[id]; k >= 0) return added_decode_form[k];
  return model->id_to_token(id);
}

std::string_view TokenizerImpl::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size) return {};
  return std::string_view(all_token_bytes)
      .substr(token_bytes_offset[id], token_bytes_offset[id + 1] - token_bytes_offset[id]);
}

void TokenizerImpl::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (!pre_tokenizer) {
    model->encode_words(std::span<const std::string_view>(&text, 1), out);
    return;
  }
  thread_local std::vector<std::string_view> pieces;
  PieceArena arena;
  pieces.clear();
  pieces.push_back(text);
  pre_tokenizer->split(pieces, arena);
  // encode_words never re-enters this function, so the thread-local list is
  // not reused while being walked.
  model->encode_words(pieces, out);
  pieces.clear();
  release_if_oversized(pieces);
}

void TokenizerImpl::encode(std::string_view text, bool add_special_tokens, bool split_special_tokens,
                           std::vector<int32_t>& out) const {
  if (const size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    fail(ErrorCode::kInvalidArgument, "text to tokenize is not valid UTF-8 (byte {} at offset {})",
         static_cast<unsigned>(static_cast<unsigned char>(text[bad])), bad);
  }
  out.clear();
  std::vector<Segment> segments;
  raw_matcher.split(text, split_special_tokens, segments);
  std::vector<Segment> inner;
  std::string normalized;
  for (const Segment& seg : segments) {
    if (seg.token_id >= 0) {
      out.push_back(seg.token_id);
      continue;
    }
    std::string_view piece = text.substr(seg.start, seg.end - seg.start);
    if (normalizer) {
      normalized.assign(piece);
      normalizer->normalize(normalized);
      piece = normalized;
    }
    inner.clear();
    normalized_matcher.split(piece, split_special_tokens, inner);
    for (const Segment& sub : inner) {
      if (sub.token_id >= 0) {
        out.push_back(sub.token_id);
      } else {
        encode_plain(piece.substr(sub.start, sub.end - sub.start), out);
      }
    }
  }
  if (add_special_tokens && post_processor) post_processor->process(out);
}

std::string TokenizerImpl::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  if (byte_level_decode) {
    std::string bytes;
    bytes.reserve(ids.size() * 4);
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size) continue;
      if (skip_special_tokens && special[id]) continue;
      bytes.append(token_bytes(id));
    }
    std::string text;
    text.reserve(bytes.size());
    append_utf8_lossy(text, bytes);
    return text;
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const auto t = token_string(id);
    if (!t) continue;
    if (skip_special_tokens && special[id]) continue;
    tokens.emplace_back(*t);
  }
  std::string text;
  if (decoder) {
    decoder->decode_chain(tokens);
    for (const auto& t : tokens) text += t;
  } else {
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) text += ' ';
      text += tokens[k];
    }
  }
  return text;
}

}  // namespace hyllm::tokenizer_detail
