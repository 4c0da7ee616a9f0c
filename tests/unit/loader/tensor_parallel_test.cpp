// What one tensor-parallel rank loads: the config with its share of the
// heads, and every tensor cut the way the layers expect.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/loader/dummy_weights.h"
#include "model/loader/tensor_parallel.h"
#include "tiny_model.h"

namespace hyllm {
namespace {

using testing::tiny_config_json;

std::vector<std::byte> bytes_of(const WeightSource& w, const std::string& name) {
  std::vector<std::byte> b(w.info(name).nbytes);
  w.read(name, b.data());
  return b;
}

// Rows [begin, end) of a row-major tensor with `row_bytes` bytes per row.
std::vector<std::byte> rows(const std::vector<std::byte>& all, size_t row_bytes, int64_t begin, int64_t end) {
  return {all.begin() + static_cast<ptrdiff_t>(begin * row_bytes), all.begin() + static_cast<ptrdiff_t>(end * row_bytes)};
}

void append(std::vector<std::byte>& out, const std::vector<std::byte>& part) { out.insert(out.end(), part.begin(), part.end()); }

ErrorCode error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kOk;
}

TEST(TensorParallelConfig, DividesHeadsAndWidthsAndReplicatesFewHeads) {
  // 2 query heads, 1 KV head, GDN 2 key / 4 value heads, MLP 128.
  const ModelConfig full = parse_model_config(tiny_config_json(false));
  const ModelConfig half = tensor_parallel_config(full, {1, 2});
  EXPECT_EQ(half.num_attention_heads, 1);
  EXPECT_EQ(half.num_key_value_heads, 1);  // replicated
  EXPECT_EQ(half.linear_num_key_heads, 1);
  EXPECT_EQ(half.linear_num_value_heads, 2);
  EXPECT_EQ(half.intermediate_size, 64);
  EXPECT_EQ(half.vocab_size, full.vocab_size);
  EXPECT_EQ(half.hidden_size, full.hidden_size);
  // 4 ranks: 2 query heads cannot be split four ways.
  EXPECT_EQ(error_of([&] { tensor_parallel_config(full, {0, 4}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { tensor_parallel_config(full, {0, 3}); }), ErrorCode::kInvalidArgument);
  const ModelConfig moe = tensor_parallel_config(parse_model_config(tiny_config_json(true)), {0, 2});
  EXPECT_EQ(moe.moe_intermediate_size, 16);
  EXPECT_EQ(moe.shared_expert_intermediate_size, 16);
  EXPECT_EQ(moe.num_experts, 4);
}

TEST(TensorParallelWeights, ColumnRowAndSegmentCuts) {
  const ModelConfig cfg = parse_model_config(tiny_config_json(false));
  DummyWeights full(cfg, 3);
  const int64_t H = cfg.hidden_size, kd = cfg.linear_key_dim(), vd = cfg.linear_value_dim();
  const size_t row = static_cast<size_t>(H) * 2;  // bf16 rows of [*, H]
  for (int r = 0; r < 2; ++r) {
    auto shard = shard_weights(full, cfg, {r, 2});
    // in_proj_qkv: the rank's half of q, of k and of v, in that order.
    const std::string qkv = "layers.0.linear_attn.in_proj_qkv.weight";
    const auto all = bytes_of(full, qkv);
    std::vector<std::byte> want;
    append(want, rows(all, row, r * kd / 2, (r + 1) * kd / 2));
    append(want, rows(all, row, kd + r * kd / 2, kd + (r + 1) * kd / 2));
    append(want, rows(all, row, 2 * kd + r * vd / 2, 2 * kd + (r + 1) * vd / 2));
    EXPECT_EQ(shard->info(qkv).shape, (Shape{kd + vd / 2, H}));
    EXPECT_EQ(bytes_of(*shard, qkv), want);
    // One KV head for two ranks: both hold it whole.
    const std::string k = "layers.3.self_attn.k_proj.weight";
    EXPECT_EQ(bytes_of(*shard, k), bytes_of(full, k));
    // o_proj: the rank's half of the input columns of every row.
    const std::string o = "layers.3.self_attn.o_proj.weight";
    const auto o_all = bytes_of(full, o);
    const int64_t K = full.info(o).shape[1];
    std::vector<std::byte> o_want;
    for (int64_t n = 0; n < H; ++n) {
      const std::byte* p = o_all.data() + (n * K + r * K / 2) * 2;
      o_want.insert(o_want.end(), p, p + K);  // K / 2 bf16 values
    }
    EXPECT_EQ(shard->info(o).shape, (Shape{H, K / 2}));
    EXPECT_EQ(bytes_of(*shard, o), o_want);
    // Replicated.
    for (const char* name : {"layers.0.input_layernorm.weight", "layers.0.linear_attn.norm.weight", "norm.weight"})
      EXPECT_EQ(bytes_of(*shard, name), bytes_of(full, name)) << name;
    // Every tensor of the checkpoint is there, under its name.
    EXPECT_EQ(shard->tensors().size(), full.tensors().size());
  }
}

TEST(TensorParallelWeights, VocabularyPadsTheLastRank) {
  nlohmann::json j = tiny_config_json(false);
  j["text_config"]["vocab_size"] = 251;
  const ModelConfig cfg = parse_model_config(j);
  DummyWeights full(cfg, 4);
  const std::string e = "embed_tokens.weight";
  const auto all = bytes_of(full, e);
  const size_t row = static_cast<size_t>(cfg.hidden_size) * 2;
  // 2 ranks: 126 rows each, the last holding 125 and one zero row.
  EXPECT_EQ(tensor_parallel_rule(full, cfg, e, {1, 2}).local_extent(), 126);
  auto first = shard_weights(full, cfg, {0, 2}), last = shard_weights(full, cfg, {1, 2});
  EXPECT_EQ(bytes_of(*first, e), rows(all, row, 0, 126));
  const auto got = bytes_of(*last, e);
  ASSERT_EQ(got.size(), 126 * row);
  EXPECT_EQ(rows(got, row, 0, 125), rows(all, row, 126, 251));
  EXPECT_EQ(rows(got, row, 125, 126), std::vector<std::byte>(row, std::byte{0}));
  EXPECT_FALSE(last->mapped(e).has_value());
  EXPECT_EQ(vocab_shard(251, {1, 2}).vocab_start, 126);
  EXPECT_EQ(vocab_shard(256, {2, 3}).rows, 86);
}

TEST(TensorParallelWeights, FusedExpertsCutGateAndUpEach) {
  const ModelConfig cfg = parse_model_config(tiny_config_json(true));
  DummyWeights full(cfg, 5, ExpertLayout::kFused);
  const std::string gu = "layers.0.mlp.experts.gate_up_proj", down = "layers.0.mlp.experts.down_proj";
  const int64_t E = cfg.num_experts, I = cfg.moe_intermediate_size, H = cfg.hidden_size;
  auto shard = shard_weights(full, cfg, {1, 2});
  EXPECT_EQ(shard->info(gu).shape, (Shape{E, I, H}));
  EXPECT_EQ(shard->info(down).shape, (Shape{E, H, I / 2}));
  const auto all = bytes_of(full, gu), got = bytes_of(*shard, gu);
  const size_t row = static_cast<size_t>(H) * 2;
  std::vector<std::byte> want;
  for (int64_t x = 0; x < E; ++x) {
    append(want, rows(all, row, x * 2 * I + I / 2, x * 2 * I + I));          // gate, second half
    append(want, rows(all, row, x * 2 * I + I + I / 2, x * 2 * I + 2 * I));  // up, second half
  }
  EXPECT_EQ(got, want);
  // The router is replicated.
  EXPECT_EQ(bytes_of(*shard, "layers.0.mlp.gate.weight"), bytes_of(full, "layers.0.mlp.gate.weight"));
}

TEST(TensorParallelWeights, BlockFp8ScalesFollowTheirWeightsInWholeBlocks) {
  nlohmann::json j = tiny_config_json(false);
  j["text_config"].update({{"hidden_size", 256}, {"head_dim", 128}, {"num_attention_heads", 2},
                           {"num_key_value_heads", 2}, {"linear_key_head_dim", 128}, {"linear_value_head_dim", 128},
                           {"linear_num_key_heads", 2}, {"linear_num_value_heads", 2}, {"intermediate_size", 256}});
  j["text_config"]["quantization_config"] = testing::block_fp8();
  const ModelConfig cfg = parse_model_config(j);
  DummyWeights full(cfg, 6);
  auto shard = shard_weights(full, cfg, {1, 2});
  // q_proj: 2 heads x [q | gate] x 128 rows -> one head, 256 rows, 2 blocks.
  const std::string q = "layers.3.self_attn.q_proj";
  EXPECT_EQ(shard->info(q + ".weight").shape, (Shape{256, 256}));
  EXPECT_EQ(shard->info(q + ".weight_scale_inv").shape, (Shape{2, 2}));
  const auto s_all = bytes_of(full, q + ".weight_scale_inv");  // [4, 2] f32
  EXPECT_EQ(bytes_of(*shard, q + ".weight_scale_inv"), rows(s_all, 2 * 4, 2, 4));
  // down_proj: columns cut, so are the scale columns.
  const std::string down = "layers.0.mlp.down_proj";
  EXPECT_EQ(shard->info(down + ".weight_scale_inv").shape, (Shape{2, 1}));
  // The tiny FP8 model's 32-wide heads cannot be cut in 128-row blocks.
  nlohmann::json small = tiny_config_json(false);
  small["text_config"]["quantization_config"] = testing::block_fp8();
  const ModelConfig small_cfg = parse_model_config(small);
  DummyWeights small_full(small_cfg, 6);
  try {
    (void)shard_weights(small_full, small_cfg, {0, 2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("FP8 scale blocks"), std::string::npos) << e.what();
  }
}

TEST(TensorParallelWeights, MappedPartsOfACheckpointNeedNoCopy) {
  const auto dir = std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny";
  const ModelConfig cfg = load_model_config(dir);
  auto full = open_weights(dir, cfg, LoadFormat::kSafetensors);
  auto shard = shard_weights(*full, cfg, {1, 2});
  const std::string q = "layers.3.self_attn.q_proj.weight";
  ASSERT_TRUE(full->mapped(q).has_value());
  const auto m = shard->mapped(q);
  ASSERT_TRUE(m.has_value());
  const auto read = bytes_of(*shard, q);
  ASSERT_EQ(m->size(), read.size());
  EXPECT_EQ(std::memcmp(m->data(), read.data(), read.size()), 0);
  EXPECT_EQ(m->data(), full->mapped(q)->data() + read.size());  // the second half, in place
  // A column cut is copied.
  EXPECT_FALSE(shard->mapped("layers.3.self_attn.o_proj.weight").has_value());
}

}  // namespace
}  // namespace hyllm
