#pragma once
// Physical floors of a Qwen3.5 model on one GPU (BENCHMARKING.md section 4):
// the fewest bytes a decode step must move and the fewest FLOPs a prefill
// must do, turned into times with measured ceilings. Benchmarks print their
// numbers as a percent of these floors next to any ratio.

#include <cstdint>

#include "model/config/model_config.h"

namespace hyllm::bench {

struct GpuCeilings {
  double bandwidth_bytes_per_s = 4.28e12;  // measured device copy, H200
  double bf16_flops = 7.9e14;              // measured 8192^3 BF16 GEMM, H200
  double fp8_flops = 1.58e15;
};

struct DecodeTraffic {
  double linear_weight_bytes = 0;  // projections, MLP/experts actually touched
  double lm_head_bytes = 0;
  double state_bytes = 0;          // GDN recurrent + conv state, read and written
  double kv_bytes = 0;             // attention KV read for the context
  double total() const { return linear_weight_bytes + lm_head_bytes + state_bytes + kv_bytes; }
};

// Bytes one decode step of `batch` sequences with `context_len` tokens each
// must move. Linear weights count 1 byte per parameter when the checkpoint is
// FP8 and 2 otherwise; the lm_head stays BF16; MoE layers read the expected
// number of distinct experts, E * (1 - (1 - k/E)^batch).
DecodeTraffic decode_traffic(const ModelConfig& cfg, int batch, int context_len);

// Active parameters that multiply each token (for prefill FLOPs).
double active_params_per_token(const ModelConfig& cfg);

struct Floors {
  double decode_step_s = 0;       // one step at `batch`
  double output_tok_per_s = 0;    // batch / decode_step_s
  double prefill_s = 0;           // one prompt of `prompt_len` tokens
};

Floors compute_floors(const ModelConfig& cfg, const GpuCeilings& gpu, int batch, int prompt_len,
                      int output_len);

}  // namespace hyllm::bench
