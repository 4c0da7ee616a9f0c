#include "engine/engine_config.h"

#include "util/status.h"

namespace hyllm {

void EngineConfig::validate() const {
  if (max_num_seqs < 1) fail(ErrorCode::kInvalidArgument, "--max-num-seqs must be >= 1, got {}", max_num_seqs);
  if (max_model_len < 1) fail(ErrorCode::kInvalidArgument, "--max-model-len must be >= 1, got {}", max_model_len);
  if (max_num_batched_tokens < max_num_seqs) {
    fail(ErrorCode::kInvalidArgument,
         "max_num_batched_tokens ({}) must be greater than or equal to max_num_seqs ({}).",
         max_num_batched_tokens, max_num_seqs);
  }
  if (block_size < 1 || block_size > 4096) {
    fail(ErrorCode::kInvalidArgument, "--block-size must be in [1, 4096], got {}", block_size);
  }
  if (!(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0)) {
    fail(ErrorCode::kInvalidArgument, "--gpu-memory-utilization must be in (0, 1], got {}",
         gpu_memory_utilization);
  }
  if (kv_cache_memory_bytes && *kv_cache_memory_bytes == 0) {
    fail(ErrorCode::kInvalidArgument, "--kv-cache-memory must be positive");
  }
  if (num_speculative_tokens < 0 || num_speculative_tokens > 4) {
    fail(ErrorCode::kInvalidArgument, "num_speculative_tokens must be in [0, 4], got {}", num_speculative_tokens);
  }
  if (num_gpu_blocks_override && *num_gpu_blocks_override < 1) {
    fail(ErrorCode::kInvalidArgument, "--num-gpu-blocks-override must be >= 1, got {}", *num_gpu_blocks_override);
  }
  if (max_cudagraph_capture_size && *max_cudagraph_capture_size < 1) {
    fail(ErrorCode::kInvalidArgument, "--max-cudagraph-capture-size must be >= 1, got {}",
         *max_cudagraph_capture_size);
  }
  if (kv_cache_dtype == "fp8_e5m2") {
    // vLLM's FlashAttention backend on Hopper takes only e4m3 too; e5m2 has
    // one mantissa bit less and no use for the checkpoints' e4m3 scales.
    fail(ErrorCode::kUnsupported,
         "--kv-cache-dtype fp8_e5m2 is not supported: hyllm's FP8 KV cache is e4m3; use --kv-cache-dtype fp8 "
         "(or fp8_e4m3)");
  }
  if (kv_cache_dtype != "auto" && kv_cache_dtype != "bfloat16" && !kv_cache_fp8()) {
    fail(ErrorCode::kInvalidArgument,
         "unknown --kv-cache-dtype '{}': expected auto, bfloat16, fp8 or fp8_e4m3", kv_cache_dtype);
  }
  if (max_logprobs < 0) fail(ErrorCode::kInvalidArgument, "--max-logprobs must be >= 0, got {}", max_logprobs);
  if (log_stats_interval_s < 0) fail(ErrorCode::kInvalidArgument, "log interval must be >= 0");
}

}  // namespace hyllm
