#pragma once
// The JSON type of the serving layer: ordered, so that object keys keep the
// client's order (tool schemas render into the chat template as given) and
// responses print their fields in the OpenAI order.

#include <nlohmann/json.hpp>

namespace hyllm::serve {

using Json = nlohmann::ordered_json;

}  // namespace hyllm::serve
