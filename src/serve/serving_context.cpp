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

}  // namespace hyllm::serve
