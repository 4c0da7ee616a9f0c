// The FP8 KV cache as the memory planner sees it: half the bytes per token,
// so the same budget holds twice the tokens, and the runner steps with it.

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/kv/cache_plan.h"
#include "runner_test_util.h"
#include "util/status.h"

namespace hyllm {
namespace {

using test::small_model_options;
using test::small_runner_options;
using test::tiny_model;

std::unique_ptr<ModelRunner> runner_with(Backend& be, DType kv) {
  ModelOptions mo = small_model_options();
  mo.kv_cache_dtype = kv;
  return std::make_unique<ModelRunner>(load_model(tiny_model(), be, mo), small_runner_options());
}

TEST(KvCacheFp8, HalfTheBytesTwiceTheTokens) {
  auto be = make_cpu_backend();
  auto bf16 = runner_with(*be, DType::kBF16);
  auto fp8 = runner_with(*be, DType::kF8E4M3);
  const CacheLayout a = bf16->cache_layout(), b = fp8->cache_layout();
  EXPECT_EQ(a.kv_bytes_per_token, 2 * b.kv_bytes_per_token);
  EXPECT_EQ(a.bytes_per_state_slot, b.bytes_per_state_slot);

  CachePlanInput in;
  in.budget_bytes = size_t{64} << 20;
  in.bytes_per_state_slot = a.bytes_per_state_slot;
  in.max_num_seqs = 8;
  in.max_model_len = 128;
  in.kv_bytes_per_token = a.kv_bytes_per_token;
  const CachePlan pa = plan_cache(in);
  in.kv_bytes_per_token = b.kv_bytes_per_token;
  const CachePlan pb = plan_cache(in);
  EXPECT_EQ(pb.num_state_slots, pa.num_state_slots);
  EXPECT_EQ(pb.num_blocks, 2 * pa.num_blocks);
  EXPECT_EQ(pb.kv_bytes, pa.kv_bytes);

  // The runner allocates that plan and steps over it.
  fp8->allocate_cache({pb.block_size, pb.num_blocks, pb.num_state_slots});
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9}, table = {pb.num_blocks - 1};
  SeqWork w;
  w.seq_id = 1;
  w.token_ids = tokens;
  w.block_table = table;
  w.state_slot = 0;
  w.sample = true;
  w.sampling = &greedy;
  StepInput step;
  step.seqs.push_back(w);
  const StepOutput out = fp8->execute(step);
  ASSERT_EQ(out.sampled.size(), 1u);
  EXPECT_GE(out.sampled[0].token, 0);
}

TEST(KvCacheFp8, OtherDtypesAreRefused) {
  auto be = make_cpu_backend();
  ModelOptions mo = small_model_options();
  mo.kv_cache_dtype = DType::kF16;
  try {
    load_model(tiny_model(), *be, mo);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("KV cache dtype"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hyllm
