#pragma once
// The random dataset's tokenizer view of a model directory's tokenizer.json.

#include <filesystem>

#include "bench/random_dataset.h"
#include "text/tokenizer.h"

namespace hyllm::bench {

class ModelDirTokenizer final : public PromptTokenizer {
 public:
  explicit ModelDirTokenizer(const std::filesystem::path& dir) : tok_(Tokenizer::from_model_dir(dir)) {}
  int32_t vocab_size() const override { return tok_.vocab_size(); }
  bool is_special(int32_t id) const override { return tok_.is_added(id) || tok_.id_to_token(id).empty(); }
  std::vector<int32_t> encode(const std::string& text) const override { return tok_.encode(text, false); }
  std::string decode(const std::vector<int32_t>& ids) const override { return tok_.decode(ids, false); }

 private:
  Tokenizer tok_;
};

}  // namespace hyllm::bench
