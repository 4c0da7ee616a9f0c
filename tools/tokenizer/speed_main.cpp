// Encode speed of hyllm's tokenizer, one thread, on one big text: the
// counterpart of hf_goldens.py's HF tokenizers measurement. Built statically
// by build_speed_static.sh so it runs on machines without our dependencies.
// (bench_tokenizer under tests/unit/tokenizer is the Google Benchmark
// program for day-to-day use; this one needs no benchmark library.)
//
// usage: tokenizer_speed TOKENIZER_JSON TEXT_FILE [REPEATS [docs]]
// With "docs" the text is documents separated by U+001E, encoded one by one.
// Prints one JSON line: load seconds, bytes, tokens, best encode seconds, MB/s.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON TEXT_FILE [REPEATS]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  try {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const auto tok = hyllm::Tokenizer::from_json_file(argv[1]);
    const double load_s = std::chrono::duration<double>(clock::now() - t0).count();
    std::ifstream in(argv[2], std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string_view> docs;
    size_t bytes = 0;
    if (argc > 4 && std::string_view(argv[4]) == "docs") {
      size_t start = 0;
      while (true) {
        const size_t end = text.find('\x1e', start);
        docs.push_back(std::string_view(text).substr(start, end - start));
        bytes += docs.back().size();
        if (end == std::string::npos) break;
        start = end + 1;
      }
    } else {
      docs.push_back(text);
      bytes = text.size();
    }
    double best = 1e30;
    size_t tokens = 0;
    for (int r = 0; r < repeats + 1; ++r) {  // the first run warms the cache, as HF's does
      const auto s = clock::now();
      size_t n = 0;
      for (std::string_view d : docs) n += tok.encode(d, false).size();
      const double dt = std::chrono::duration<double>(clock::now() - s).count();
      tokens = n;
      if (r > 0 && dt < best) best = dt;
    }
    std::printf("{\"load_s\": %.4f, \"bytes\": %zu, \"tokens\": %zu, \"best_s\": %.5f, \"mb_per_s\": %.2f}\n",
                load_s, bytes, tokens, best, bytes / best / 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
