// hyllm export-gguf: writes a model's weights (a checkpoint's, or exactly the
// dummy weights `hyllm serve --load-format dummy --seed S` makes) and its
// tokenizer as a GGUF file in llama.cpp's qwen35 / qwen35moe layout, so that
// llama.cpp and hyllm can be run on the same function (gguf/qwen35_gguf.h).
//
//   hyllm export-gguf --model DIR --out FILE.gguf [--load-format auto|dummy] [--seed 0]
//                     [--tokenizer DIR | --byte-vocab] [--dummy-router-skew 0] [--name NAME]
//                     [--outtype bf16|q8_0]

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "command.h"
#include "engine_setup.h"
#include "gguf/gguf_vocab.h"
#include "gguf/gguf_writer.h"
#include "gguf/qwen35_gguf.h"
#include "model/config/model_config.h"
#include "model/loader/weight_source.h"
#include "util/status.h"

namespace hyllm::app {
namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string model, out, load_format = "auto", tokenizer, name, outtype = "bf16";
  uint64_t seed = 0;
  float dummy_router_skew = 0.0f;
  bool byte_vocab = false;
};

int run_export(const ExportOptions& o) {
  const fs::path dir = o.model.empty() ? default_model_dir() : fs::path(o.model);
  const ModelConfig config = load_model_config(dir);
  gguf::qwen35_gguf_arch(config);  // refuse what llama.cpp cannot load before any work
  const gguf::GgufOutType outtype = gguf::parse_gguf_outtype(o.outtype);
  const fs::path tok_dir = o.tokenizer.empty() ? dir : fs::path(o.tokenizer);
  gguf::GgufVocab vocab;
  if (o.byte_vocab) vocab = gguf::byte_level_vocab(config.vocab_size);
  else if (fs::exists(tok_dir / "tokenizer.json")) vocab = gguf::read_hf_vocab(tok_dir, config.vocab_size);
  else
    fail(ErrorCode::kNotFound, "no {}: give --tokenizer DIR, or --byte-vocab for a model without a tokenizer",
         (tok_dir / "tokenizer.json").string());
  auto weights = open_weights(dir, config, parse_load_format(o.load_format), o.seed, o.dummy_router_skew);

  gguf::GgufWriter writer;
  const std::string name = o.name.empty() ? dir.filename().string() : o.name;
  gguf::add_qwen35_model(config, *weights, name, writer, outtype);
  gguf::write_vocab(vocab, writer);
  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  writer.write(o.out, [&](size_t i, size_t n, const std::string& tensor) {
    auto now = std::chrono::steady_clock::now();
    if (i == n || now - last > std::chrono::seconds(5)) {
      std::fprintf(stderr, "export-gguf: %zu/%zu tensors (%s)\n", i, n, tensor.c_str());
      last = now;
    }
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %s: %s (%s), %zu tensors, %.2f GiB of tensor data, %zu tokens (pre-tokenizer %s), from %s in "
              "%.1f s\n",
              o.out.c_str(), gguf::qwen35_gguf_arch(config).c_str(), o.outtype.c_str(), writer.num_tensors(),
              static_cast<double>(writer.data_bytes()) / 1073741824.0, vocab.tokens.size(), vocab.pre.c_str(),
              weights->describe().c_str(), s);
  return 0;
}

void setup_export(CLI::App& sub, int& exit_code) {
  auto o = std::make_shared<ExportOptions>();
  sub.add_option("--model", o->model, "Model directory: config.json, and the weights unless --load-format dummy "
                                      "(default: the embedded model)");
  sub.add_option("--out", o->out, "The GGUF file to write")->required();
  sub.add_option("--load-format", o->load_format, "auto (the checkpoint) or dummy (hyllm's seeded random weights)")
      ->capture_default_str();
  sub.add_option("--seed", o->seed, "Dummy weight seed (as `hyllm serve --seed`)")->capture_default_str();
  sub.add_option("--dummy-router-skew", o->dummy_router_skew, "As `hyllm serve --dummy-router-skew`")
      ->capture_default_str();
  sub.add_option("--tokenizer", o->tokenizer, "Directory with tokenizer.json (default: --model)");
  sub.add_flag("--byte-vocab", o->byte_vocab,
               "No tokenizer: write the 256 byte tokens padded to vocab_size (prompts as token ids only)");
  sub.add_option("--name", o->name, "general.name (default: the model directory's name)");
  sub.add_option("--outtype", o->outtype,
                 "The matrices' type, as llama.cpp's converter names it: bf16, or q8_0 (ggml's 8-bit blocks)")
      ->capture_default_str();
  sub.callback([o, &exit_code] {
    try {
      exit_code = run_export(*o);
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = 1;
    }
  });
}

const CommandRegistration reg{"export-gguf", "Write a model's weights and tokenizer as a llama.cpp GGUF file",
                              setup_export};

}  // namespace
}  // namespace hyllm::app
