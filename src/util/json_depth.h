#pragma once
// How deep JSON text nests, without parsing it: one linear scan that skips
// strings. Untrusted JSON (request bodies, strings inside them, model file
// headers) is checked with it before it is parsed, because copying, printing
// or destroying a deeply nested value recurses once per level.

#include <string_view>

namespace hyllm {

// Whether `text` nests arrays and objects at most max_depth deep. It checks
// no other syntax: the parser does.
bool json_depth_within(std::string_view text, int max_depth);

}  // namespace hyllm
