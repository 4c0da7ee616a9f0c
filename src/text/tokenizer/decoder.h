#pragma once
// tokenizer.json "decoder": token strings -> text (HF's decode_chain).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hyllm::tokenizer_detail {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // True when the whole decoder is ByteLevel: each token maps to its bytes
  // independently and the result is their concatenation made valid UTF-8.
  virtual bool is_byte_level() const { return false; }
  // True when ByteFallback turns "<0xXX>" tokens into bytes.
  virtual bool has_byte_fallback() const { return false; }
};

// nullptr for JSON null; kUnsupported for types hyllm lacks.
std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& j);

// The bytes ByteLevel decoding gives one token: its alphabet bytes, or the
// token's own UTF-8 when some character is outside the alphabet.
std::string byte_level_token_bytes(std::string_view token);

}  // namespace hyllm::tokenizer_detail
