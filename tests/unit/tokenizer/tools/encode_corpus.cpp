// Encodes the conformance corpus with hyllm's tokenizer, one JSON line of ids
// per document, for comparison with the HF and transformers.js outputs.
//
// usage: tokenizer_encode_corpus TOKENIZER_JSON CORPUS_JSONL_XZ OUT_JSONL [--split-special] [--add-special]

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/tokenizer.h"
#include "../xz_file.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON CORPUS_JSONL_XZ OUT_JSONL [--split-special] [--add-special]\n", argv[0]);
    return 2;
  }
  bool split = false, add = false;
  for (int i = 4; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--split-special")) split = true;
    if (!std::strcmp(argv[i], "--add-special")) add = true;
  }
  try {
    const auto tok = hyllm::Tokenizer::from_json_file(argv[1]);
    std::istringstream corpus(hyllm::testing::read_xz_file(argv[2]));
    std::ofstream out(argv[3]);
    std::string line;
    while (std::getline(corpus, line)) {
      if (line.empty()) continue;
      const auto doc = nlohmann::json::parse(line);
      const auto ids = tok.encode(doc["text"].get<std::string>(), add, split);
      out << nlohmann::json({{"name", doc["name"]}, {"ids", ids}}).dump() << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
