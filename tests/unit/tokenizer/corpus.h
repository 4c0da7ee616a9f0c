#pragma once
// The committed conformance corpus (tests/data/tokenizer/corpus.jsonl.xz).

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "xz_file.h"

namespace hyllm::testing {

struct CorpusDoc {
  std::string name;
  std::string text;
  bool edge = false;  // hand-made edge case
};

inline std::string tokenizer_data_dir() { return std::string(HYLLM_SOURCE_DIR) + "/tests/data/tokenizer"; }

inline std::vector<CorpusDoc> load_corpus(const std::string& path = tokenizer_data_dir() + "/corpus.jsonl.xz") {
  std::istringstream in(read_xz_file(path));
  std::vector<CorpusDoc> docs;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    docs.push_back({j.at("name").get<std::string>(), j.at("text").get<std::string>(), j.value("edge", false)});
  }
  return docs;
}

// Every real-text document joined: one big text for speed measurements.
inline std::string corpus_text(const std::vector<CorpusDoc>& docs, bool include_edge = false) {
  std::string all;
  for (const auto& d : docs) {
    if (d.edge && !include_edge) continue;
    all += d.text;
    all += '\n';
  }
  return all;
}

}  // namespace hyllm::testing
