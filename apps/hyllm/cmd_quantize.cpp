// hyllm quantize: a BF16 checkpoint to Qwen block FP8 or ModelOpt per-tensor
// FP8, in the real file formats (model/quantize/quantize.h).
//
//   hyllm quantize --model DIR --out DIR --format fp8-block|modelopt-fp8 [--dequantized-out DIR]

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "command.h"
#include "model/quantize/quantize.h"
#include "text/tokenizer.h"
#include "util/status.h"

namespace hyllm::app {
namespace {

struct QuantizeCli {
  std::string model, out, format = "fp8-block", dequantized_out, calibration_file;
};

// ModelOpt calibration when no --calibration-file is given: prose and code,
// because random token ids under-represent real activations.
constexpr const char* kDefaultCalibrationText =
    "The quick brown fox jumps over the lazy dog. In the beginning the Universe was created. This has made a lot "
    "of people very angry and been widely regarded as a bad move. Call me Ishmael. Some years ago, never mind how "
    "long precisely, having little or no money in my purse, I thought I would sail about a little.\n\n"
    "def mean(values):\n    \"\"\"Return the arithmetic mean of a list of numbers.\"\"\"\n    return "
    "sum(values) / len(values)\n\nfor i in range(10):\n    print(i, i ** 2)\n";

std::vector<int32_t> calibration_tokens(const QuantizeCli& o) {
  const std::filesystem::path dir = o.model;
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    if (!o.calibration_file.empty())
      fail(ErrorCode::kNotFound, "--calibration-file needs {}", (dir / "tokenizer.json").string());
    return {};  // the quantiser's pseudo-random ids
  }
  std::string text = kDefaultCalibrationText;
  if (!o.calibration_file.empty()) {
    std::ifstream f(o.calibration_file);
    if (!f) fail(ErrorCode::kNotFound, "cannot read {}", o.calibration_file);
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  auto ids = Tokenizer::from_model_dir(dir).encode(text, true);
  if (ids.size() > 2048) ids.resize(2048);
  return ids;
}

void setup_quantize(CLI::App& sub, int& exit_code) {
  auto o = std::make_shared<QuantizeCli>();
  sub.add_option("--model", o->model, "BF16 model directory")->required();
  sub.add_option("--out", o->out, "Output directory")->required();
  sub.add_option("--format", o->format, "fp8-block (Qwen, 128x128 blocks) or modelopt-fp8 (static per-tensor)");
  sub.add_option("--dequantized-out", o->dequantized_out,
                 "Also write the dequantised BF16 reference checkpoint here");
  sub.add_option("--calibration-file", o->calibration_file,
                 "modelopt-fp8: text whose first 2048 tokens calibrate the input scales");
  sub.callback([o, &exit_code] {
    try {
      QuantizeOptions qo;
      qo.target = parse_fp8_target(o->format);
      qo.dequantized_dir = o->dequantized_out;
      if (qo.target == Fp8Target::kModelOptFp8) qo.calibration_tokens = calibration_tokens(*o);
      auto cpu = make_cpu_backend();
      QuantizeReport r = quantize_checkpoint(o->model, o->out, qo, *cpu);
      std::printf("%lld linears quantized, %lld tensors copied, %.1f MB -> %.1f MB\n",
                  static_cast<long long>(r.quantized_linears), static_cast<long long>(r.copied_tensors),
                  r.bytes_in / 1e6, r.bytes_out / 1e6);
      exit_code = 0;
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = 1;
    }
  });
}

const CommandRegistration reg{"quantize", "Quantize a BF16 checkpoint to FP8 (block or ModelOpt)", setup_quantize};

}  // namespace
}  // namespace hyllm::app
