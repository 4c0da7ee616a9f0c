#pragma once
// tokenizer.json "normalizer": text -> text before pre-tokenization. Offsets
// are not tracked (hyllm never needs them).

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace hyllm::tokenizer_detail {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Normalizes in place; text is valid UTF-8 and stays so.
  virtual void normalize(std::string& text) const = 0;
};

// nullptr for a JSON null. Throws kUnsupported for types hyllm lacks and
// kCorruptData for malformed entries.
std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& j);

// Unicode normal forms via utf8proc (exposed for tests).
enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
std::string unicode_normalize(std::string_view text, NormalForm form);

}  // namespace hyllm::tokenizer_detail
