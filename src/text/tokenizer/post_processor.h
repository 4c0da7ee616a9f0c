#pragma once
// tokenizer.json "post_processor": adds special tokens around one encoded
// sequence when add_special_tokens is set (hyllm never encodes pairs).

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hyllm::tokenizer_detail {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
  // The largest id process() can insert, -1 if it inserts none; the loader
  // checks it against the vocabulary so no id it adds can index past it.
  virtual int32_t largest_id() const = 0;
};

// nullptr for JSON null; kUnsupported for types hyllm lacks.
std::unique_ptr<PostProcessor> parse_post_processor(const nlohmann::json& j);

}  // namespace hyllm::tokenizer_detail
