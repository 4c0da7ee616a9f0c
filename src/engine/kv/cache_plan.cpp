#include "engine/kv/cache_plan.h"

#include <algorithm>
#include <limits>

#include "util/log.h"
#include "util/status.h"

namespace hyllm {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// 2042016 -> "2,042,016", as vLLM prints token counts.
std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return v < 0 ? "-" + out : out;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

CachePlan plan_cache(const CachePlanInput& in) {
  HYLLM_CHECK(in.block_size > 0 && in.max_num_seqs > 0 && in.max_model_len > 0,
              "bad cache plan input");
  CachePlan plan;
  plan.block_size = in.block_size;
  const int64_t blocks_per_seq = ceil_div(in.max_model_len, in.block_size);
  const int64_t int_max = std::numeric_limits<int32_t>::max();
  // Totals first (the executor's reserved blocks and slots included), the
  // pools are what is left of them.
  const int64_t rb = in.reserved_blocks, rs = in.reserved_state_slots;
  HYLLM_CHECK(rb >= 0 && rs >= 0, "negative cache reservation");
  const int64_t wanted_slots = static_cast<int64_t>(in.max_num_seqs) * (in.enable_prefix_caching ? 2 : 1) + rs;

  if (in.num_blocks_override) {
    plan.num_blocks = *in.num_blocks_override;
    const size_t kv = static_cast<size_t>(plan.num_blocks) * in.kv_bytes_per_token * static_cast<size_t>(in.block_size);
    const size_t left = in.budget_bytes > kv ? in.budget_bytes - kv : 0;
    plan.num_state_slots = static_cast<int>(in.bytes_per_state_slot == 0
        ? wanted_slots
        : std::min<int64_t>(wanted_slots, static_cast<int64_t>(left / in.bytes_per_state_slot)));
  } else if (in.kv_bytes_per_token == 0) {
    // No attention layers: blocks cost nothing; keep enough for every sequence.
    plan.num_state_slots = static_cast<int>(in.bytes_per_state_slot == 0
        ? wanted_slots
        : std::min<int64_t>(wanted_slots, static_cast<int64_t>(in.budget_bytes / in.bytes_per_state_slot)));
    plan.num_blocks = static_cast<int>(std::min<int64_t>(int_max, blocks_per_seq * in.max_num_seqs + rb));
  } else {
    const size_t block_bytes = in.kv_bytes_per_token * static_cast<size_t>(in.block_size);
    int64_t slots = wanted_slots;
    if (in.bytes_per_state_slot > 0) {
      slots = std::min<int64_t>(slots, static_cast<int64_t>(in.budget_bytes / 2 / in.bytes_per_state_slot));
      slots = std::max<int64_t>(slots, 1 + rs);
      const size_t needed_kv = static_cast<size_t>(blocks_per_seq + rb) * block_bytes;
      if (slots * in.bytes_per_state_slot + needed_kv > in.budget_bytes) {
        slots = in.budget_bytes > needed_kv
            ? static_cast<int64_t>((in.budget_bytes - needed_kv) / in.bytes_per_state_slot) : 0;
      }
      // Keep one slot when the budget holds one: then a short KV cache is
      // reported with vLLM's max seq len message below.
      if (slots < 1 + rs && in.budget_bytes >= (1 + rs) * in.bytes_per_state_slot) slots = 1 + rs;
    }
    const size_t state_bytes = static_cast<size_t>(std::max<int64_t>(slots, 0)) * in.bytes_per_state_slot;
    const int64_t blocks = in.budget_bytes > state_bytes
        ? static_cast<int64_t>((in.budget_bytes - state_bytes) / block_bytes) : 0;
    plan.num_state_slots = static_cast<int>(std::max<int64_t>(slots, 0));
    plan.num_blocks = static_cast<int>(std::min<int64_t>(blocks, int_max));
  }
  plan.kv_bytes = static_cast<size_t>(plan.num_blocks) * in.kv_bytes_per_token * in.block_size;
  plan.state_bytes = static_cast<size_t>(plan.num_state_slots) * in.bytes_per_state_slot;
  plan.reserved_blocks = static_cast<int>(rb);
  plan.reserved_state_slots = static_cast<int>(rs);
  plan.num_blocks = static_cast<int>(std::max<int64_t>(plan.num_blocks - rb, 0));
  plan.num_state_slots = static_cast<int>(std::max<int64_t>(plan.num_state_slots - rs, 0));
  plan.kv_capacity_tokens = static_cast<int64_t>(plan.num_blocks) * in.block_size;

  if (plan.num_state_slots < 1) {
    fail(ErrorCode::kInvalidArgument,
         "The cache budget ({:.3f} GiB) cannot hold one GDN state slot ({:.3f} GiB). Try increasing "
         "`gpu_memory_utilization` or `--kv-cache-memory` when initializing the engine.",
         in.budget_bytes / kGiB, in.bytes_per_state_slot / kGiB);
  }
  if (plan.kv_capacity_tokens < in.max_model_len) {
    fail(ErrorCode::kInvalidArgument,
         "The model's max seq len ({}) is larger than the maximum number of tokens that can be "
         "stored in KV cache ({}). Try increasing `gpu_memory_utilization` or decreasing "
         "`max_model_len` when initializing the engine.",
         in.max_model_len, plan.kv_capacity_tokens);
  }
  const double by_kv = static_cast<double>(plan.num_blocks) / static_cast<double>(blocks_per_seq);
  plan.max_concurrency = std::min(by_kv, static_cast<double>(std::min(plan.num_state_slots, in.max_num_seqs)));
  return plan;
}

void log_cache_plan(const CachePlan& plan, const CachePlanInput& in) {
  log::info("Available KV cache memory: {:.2f} GiB", in.budget_bytes / kGiB);
  log::info("KV cache size: {} tokens ({} blocks of {} tokens, {:.2f} GiB)",
            with_commas(plan.kv_capacity_tokens), with_commas(plan.num_blocks), plan.block_size,
            plan.kv_bytes / kGiB);
  if (in.bytes_per_state_slot > 0) {
    log::info("GDN state slots: {} ({:.2f} MiB each, {:.2f} GiB){}", plan.num_state_slots,
              in.bytes_per_state_slot / (1024.0 * 1024.0), plan.state_bytes / kGiB,
              in.enable_prefix_caching ? "; those no running sequence holds keep prefix-cache snapshots" : "");
  }
  log::info("Maximum concurrency for {} tokens per request: {:.2f}x", with_commas(in.max_model_len),
            plan.max_concurrency);
  if (plan.num_state_slots < in.max_num_seqs) {
    log::warn("Only {} GDN state slots fit in the cache budget: at most {} sequences run at once "
              "(--max-num-seqs {}){}", plan.num_state_slots, plan.num_state_slots, in.max_num_seqs,
              in.num_blocks_override ? ""
                                     : "; for many short sequences, --num-gpu-blocks-override trades KV blocks "
                                       "for slots (docs/prefix-caching.md, \"Budget split and eviction order\")");
  }
}

}  // namespace hyllm
