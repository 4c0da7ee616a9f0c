#pragma once
// Device memory planning as vLLM does it: after the weights are loaded, one
// profile step at the largest shapes the scheduler may produce grows every
// activation buffer and kernel scratch arena to its peak; what the device
// then has in use stays in use, and the KV cache (with the GDN state slots)
// gets the rest of gpu_memory_utilization x total memory. Pure arithmetic
// here, so that it is tested without a GPU; model_runner.cpp runs the step.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hyllm {

// Token counts of the profile step's sequences: min(max_seqs, max_tokens)
// sequences of at least one token (the widest decode batch, every row
// sampled), the rest of the token budget given to the first ones, each at
// most max_model_len long (the longest prefill chunk).
std::vector<int64_t> profile_step_lengths(int64_t max_tokens, int64_t max_seqs, int64_t max_model_len);

struct KvBudgetInput {
  size_t total_bytes = 0;         // device memory
  size_t used_bytes = 0;          // in use after the profile step (its cache freed)
  size_t weight_bytes = 0;        // of used_bytes: the model's weights
  size_t activation_bytes = 0;    // of used_bytes: buffers, scratch, sampler at their peak
  double gpu_memory_utilization = 0.9;
};

struct KvBudget {
  size_t allowed_bytes = 0;       // utilization x total
  size_t other_bytes = 0;         // used - weights - activations (CUDA context, libraries, other processes)
  size_t cache_bytes = 0;         // allowed - used
};

// Throws Error(kOutOfMemory) when the memory in use already reaches the
// allowed share, or kInvalidArgument for a utilization outside (0, 1].
KvBudget kv_cache_budget(const KvBudgetInput& in);

// The startup lines: what the instance may use, what weights, activations
// and the rest take, and what is left for the KV cache.
void log_kv_budget(const KvBudgetInput& in, const KvBudget& b);

}  // namespace hyllm
