#include "bench/roofline.h"

#include <gtest/gtest.h>

namespace hyllm::bench {
namespace {

ModelConfig fixture(const char* name) {
  return load_model_config(std::string(HYLLM_SOURCE_DIR) + "/tests/data/configs/" + name);
}

// Anchors from BENCHMARKING.md section 4 (derived by hand there).
TEST(Roofline, Dense27BFp8DecodeMovesAbout27GB) {
  ModelConfig c = fixture("qwen3_5_27b_fp8");
  DecodeTraffic t = decode_traffic(c, 1, 1024);
  EXPECT_NEAR(t.linear_weight_bytes / 1e9, 24.35, 0.1);
  EXPECT_NEAR(t.lm_head_bytes / 1e9, 2.54, 0.01);
  EXPECT_NEAR(t.state_bytes / 1e6, 2 * 151.0 + 5.9, 2.0);
  EXPECT_NEAR(t.total() / 1e9, 27.3, 0.1);
  Floors f = compute_floors(c, GpuCeilings{}, 1, 1024, 0);
  EXPECT_NEAR(f.decode_step_s * 1e3, 6.38, 0.05);  // 27.3 GB at 4.28 TB/s
  EXPECT_NEAR(f.prefill_s * 1e3, 31.7, 0.5);       // ~50 TFLOP at 1.58 PFLOP/s
}

TEST(Roofline, Moe35BFp8DecodeMovesAbout3point6GB) {
  ModelConfig c = fixture("qwen3_5_35b_a3b_fp8");
  DecodeTraffic t = decode_traffic(c, 1, 1024);
  EXPECT_NEAR(t.lm_head_bytes / 1e9, 1.02, 0.01);
  EXPECT_NEAR(t.total() / 1e9, 3.6, 0.1);
  // Distinct experts touched grow with the batch: 57, 102, 163 of 256 at 8, 16, 32.
  DecodeTraffic t32 = decode_traffic(c, 32, 1024);
  double expert_bytes = 3.0 * 512 * 2048;
  double experts32 = (t32.linear_weight_bytes - t.linear_weight_bytes) / (40 * expert_bytes) + 8;
  EXPECT_NEAR(experts32, 163, 2);
}

TEST(Roofline, Bf16DoublesLinearBytes) {
  ModelConfig c = fixture("qwen3_5_27b");
  EXPECT_NEAR(decode_traffic(c, 1, 0).linear_weight_bytes / 1e9, 48.7, 0.2);
  EXPECT_NEAR(active_params_per_token(c) / 1e9, 24.35, 0.1);
}

}  // namespace
}  // namespace hyllm::bench
