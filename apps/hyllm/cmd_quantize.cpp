// hyllm quantize: a BF16 checkpoint to Qwen block FP8 or ModelOpt per-tensor
// FP8, in the real file formats (model/quantize/quantize.h).
//
//   hyllm quantize --model DIR --out DIR --format fp8-block|modelopt-fp8 [--dequantized-out DIR]

#include <cstdio>
#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "command.h"
#include "model/quantize/quantize.h"
#include "util/status.h"

namespace hyllm::app {
namespace {

struct QuantizeCli {
  std::string model, out, format = "fp8-block", dequantized_out;
};

void setup_quantize(CLI::App& sub, int& exit_code) {
  auto o = std::make_shared<QuantizeCli>();
  sub.add_option("--model", o->model, "BF16 model directory")->required();
  sub.add_option("--out", o->out, "Output directory")->required();
  sub.add_option("--format", o->format, "fp8-block (Qwen, 128x128 blocks) or modelopt-fp8 (static per-tensor)");
  sub.add_option("--dequantized-out", o->dequantized_out,
                 "Also write the dequantised BF16 reference checkpoint here");
  sub.callback([o, &exit_code] {
    try {
      QuantizeOptions qo;
      qo.target = parse_fp8_target(o->format);
      qo.dequantized_dir = o->dequantized_out;
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
