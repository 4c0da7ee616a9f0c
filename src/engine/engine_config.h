#pragma once
// Engine configuration: the scheduler and cache settings of `vllm serve`, with
// the same names and meanings. Parsed once by the app from the CLI; the model
// runner is built from the same values (gpu_memory_utilization,
// max_num_batched_tokens and max_num_seqs size its activation buffers).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hyllm {

struct EngineConfig {
  // Scheduler.
  int max_num_seqs = 256;              // --max-num-seqs: running sequences (all choices)
  int max_num_batched_tokens = 2048;   // --max-num-batched-tokens: token budget per step
  int max_model_len = 4096;            // --max-model-len: prompt + output cap
  int block_size = 16;                 // --block-size: tokens per paged-KV block

  // Cache.
  std::optional<size_t> kv_cache_memory_bytes;  // --kv-cache-memory: overrides the executor's budget
  double gpu_memory_utilization = 0.9;          // applied by the executor when it sizes its budget
  // --kv-cache-dtype: "auto" / "bfloat16" (the model dtype), "fp8" / "fp8_e4m3"
  // (e4m3 codes with the checkpoint's per-layer scales, else 1.0); fp8_e5m2
  // is refused with a message.
  std::string kv_cache_dtype = "auto";
  // --[no-]enable-prefix-caching: reuse the KV blocks and GDN state of
  // cached prompt prefixes (engine/kv/kv_cache_manager.h).
  bool enable_prefix_caching = true;
  // --num-gpu-blocks-override: use exactly this many KV blocks (vLLM's knob
  // for testing preemption); state slots get what the budget leaves.
  std::optional<int> num_gpu_blocks_override;
  // --max-cudagraph-capture-size: the largest decode batch replayed from a
  // device graph (at most 512, the graphs' own bound); unset: 512.
  std::optional<int> max_cudagraph_capture_size;

  // Sampling.
  uint64_t seed = 0;                    // --seed: draws the seeds of requests that give none
  std::vector<int32_t> eos_token_ids;   // from generation_config.json (else config.json)
  int max_logprobs = 20;                // --max-logprobs: cap on SamplingParams::logprobs

  // --speculative-config (speculative_config.h): draft up to this many tokens
  // per step with the model's MTP head and verify them in the next step; 0 off.
  int num_speculative_tokens = 0;

  // Logging: the periodic "Avg prompt throughput ..." line; 0 turns it off.
  double log_stats_interval_s = 10.0;

  // Throws Error(kInvalidArgument / kUnsupported) with a message naming the flag.
  void validate() const;
  // Whether --kv-cache-dtype asks for the e4m3 cache (after validate()).
  bool kv_cache_fp8() const { return kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3"; }
};

}  // namespace hyllm
