#pragma once
// BF16 checkpoint -> FP8 checkpoint in the real file formats:
//  - kFp8Block: Qwen's fine-grained FP8 ("quant_method": "fp8", e4m3,
//    128x128 blocks, dynamic activations): per quantized linear `weight` e4m3
//    [N, K] and `weight_scale_inv` fp32 [ceil(N/128), ceil(K/128)] with
//    W ~= Wq * s (the scale is the block's amax / 448);
//  - kModelOptFp8: NVIDIA ModelOpt static per-tensor FP8
//    ("quant_method": "modelopt", "quant_algo": "FP8"): `weight` e4m3,
//    scalar `weight_scale` (amax / 448) and scalar `input_scale` (the
//    activation amax / 448 seen on calibration tokens run through the BF16
//    model on the CPU backend).
// Quantized: q/k/v/o_proj, in_proj_qkv, in_proj_z, out_proj, dense MLP and
// shared-expert gate/up/down, routed experts (written per expert, as the
// official FP8 repos store them). Everything else is copied unchanged.
//
// The dequantised reference (optional) is a BF16 checkpoint holding
// bf16(Wq * s) for every quantized weight: what the FP8 model should compute
// up to activation quantisation.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace hyllm {

enum class Fp8Target : uint8_t { kFp8Block, kModelOptFp8 };
// "fp8-block" / "modelopt-fp8"; kInvalidArgument otherwise.
Fp8Target parse_fp8_target(const std::string& name);

struct QuantizeOptions {
  Fp8Target target = Fp8Target::kFp8Block;
  std::filesystem::path dequantized_dir;  // empty: not written
  // ModelOpt calibration: token ids run through the model (empty: a fixed
  // pseudo-random sequence of 256 ids).
  std::vector<int32_t> calibration_tokens;
};

struct QuantizeReport {
  int64_t quantized_linears = 0;
  int64_t copied_tensors = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

class Backend;

// `calibration_backend` runs the BF16 model for ModelOpt's input scales.
QuantizeReport quantize_checkpoint(const std::filesystem::path& in_dir, const std::filesystem::path& out_dir,
                                   const QuantizeOptions& options, Backend& calibration_backend);

}  // namespace hyllm
