#include "serve/serving_context.h"

#include <algorithm>

#include "serve/api_error.h"

namespace hyllm::serve {

void ServingContext::check_model(const std::optional<std::string>& requested) const {
  if (!requested) return;
  if (std::find(served_model_names.begin(), served_model_names.end(), *requested) == served_model_names.end()) {
    throw model_not_found(*requested);
  }
}

int32_t ServingContext::vocab_size() const { return tokenizer ? tokenizer->vocab_size() : model_vocab_size; }

const Tokenizer& ServingContext::require_tokenizer(const char* param) const {
  if (!tokenizer) {
    throw bad_request("Tokenizer not available when `skip_tokenizer_init=True`: this server takes token ids and "
                      "returns token ids (`prompt` as a list of ids on /v1/completions)",
                      param);
  }
  return *tokenizer;
}

}  // namespace hyllm::serve
