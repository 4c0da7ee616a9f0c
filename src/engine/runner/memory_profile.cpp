#include "engine/runner/memory_profile.h"

#include <algorithm>

#include "util/log.h"
#include "util/status.h"

namespace hyllm {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

std::vector<int64_t> profile_step_lengths(int64_t max_tokens, int64_t max_seqs, int64_t max_model_len) {
  HYLLM_CHECK(max_tokens > 0 && max_seqs > 0 && max_model_len > 0, "profile step of {} tokens, {} seqs, len {}",
              max_tokens, max_seqs, max_model_len);
  const int64_t seqs = std::min(max_seqs, max_tokens);
  std::vector<int64_t> lengths(static_cast<size_t>(seqs), 1);
  int64_t left = max_tokens - seqs;
  for (int64_t& n : lengths) {
    if (left == 0) break;
    const int64_t extra = std::min(left, max_model_len - 1);
    n += extra;
    left -= extra;
  }
  return lengths;
}

KvBudget kv_cache_budget(const KvBudgetInput& in) {
  if (!(in.gpu_memory_utilization > 0.0 && in.gpu_memory_utilization <= 1.0))
    fail(ErrorCode::kInvalidArgument, "--gpu-memory-utilization {} must be in (0, 1]", in.gpu_memory_utilization);
  KvBudget b;
  b.allowed_bytes = static_cast<size_t>(in.gpu_memory_utilization * static_cast<double>(in.total_bytes));
  const size_t accounted = in.weight_bytes + in.activation_bytes;
  b.other_bytes = in.used_bytes > accounted ? in.used_bytes - accounted : 0;
  if (in.used_bytes >= b.allowed_bytes) {
    fail(ErrorCode::kOutOfMemory,
         "--gpu-memory-utilization {}: {:.2f} GiB allowed but {:.2f} GiB are in use after loading the model and "
         "profiling a step (weights {:.2f} GiB, activations {:.2f} GiB, other {:.2f} GiB): no memory is left for "
         "the KV cache. Raise --gpu-memory-utilization or lower --max-num-batched-tokens / --max-num-seqs.",
         in.gpu_memory_utilization, b.allowed_bytes / kGiB, in.used_bytes / kGiB, in.weight_bytes / kGiB,
         in.activation_bytes / kGiB, b.other_bytes / kGiB);
  }
  b.cache_bytes = b.allowed_bytes - in.used_bytes;
  return b;
}

void log_kv_budget(const KvBudgetInput& in, const KvBudget& b) {
  log::info("the current hyllm instance can use total_gpu_memory ({:.2f}GiB) x gpu_memory_utilization ({:.2f}) = "
            "{:.2f}GiB",
            in.total_bytes / kGiB, in.gpu_memory_utilization, b.allowed_bytes / kGiB);
  log::info("model weights take {:.2f}GiB; non-weight, non-activation memory takes {:.2f}GiB; activation peak "
            "memory (buffers, kernel scratch, sampler) takes {:.2f}GiB; the rest of the memory reserved for KV "
            "Cache is {:.2f}GiB.",
            in.weight_bytes / kGiB, b.other_bytes / kGiB, in.activation_bytes / kGiB, b.cache_bytes / kGiB);
}

}  // namespace hyllm
