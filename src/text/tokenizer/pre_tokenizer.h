#pragma once
// tokenizer.json "pre_tokenizer": splits normalized text into words that the
// model encodes independently. Pieces are views into the input or into the
// arena (for pieces a stage rewrites, such as ByteLevel's prefix space).

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hyllm::tokenizer_detail {

using PieceArena = std::deque<std::string>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces each piece by its sub-pieces (never empty ones).
  virtual void split(std::vector<std::string_view>& pieces, PieceArena& arena) const = 0;
  // Whether this stage maps text to GPT-2's byte-level alphabet (then the
  // model's vocabulary is read as bytes).
  virtual bool is_byte_level() const { return false; }
};

// nullptr for JSON null; kUnsupported for types hyllm lacks.
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& j);

}  // namespace hyllm::tokenizer_detail
