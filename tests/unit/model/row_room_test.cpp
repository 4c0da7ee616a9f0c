// The activations the model takes from its arena have the row room of ops.h's
// kActivationRowPad, the sizing functions count it, and the views and the
// linears' arguments say so (the flags that let an op run whole groups of
// rows).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "../ops/cpu_forwarding_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/kernels.h"
#include "model/config/model_config.h"
#include "model/layers/activation.h"
#include "model/layers/linear.h"
#include "model/loader/qwen35_catalogue.h"

namespace hyllm {
namespace {

// The CPU backend, with the row-room flags of every linear it runs recorded.
class RecordingKernels final : public Kernels {
 public:
  explicit RecordingKernels(Kernels& inner) : inner_(inner) {}
  void linear(const LinearArgs& a) override {
    calls.push_back(a);
    inner_.linear(a);
  }
  void quantize_fp8(const QuantizeFp8Args& a) override { inner_.quantize_fp8(a); }
  void quantize_weight_fp8(const QuantizeWeightFp8Args& a) override { inner_.quantize_weight_fp8(a); }
  void fill_random(const FillRandomArgs& a) override { inner_.fill_random(a); }
  std::vector<LinearArgs> calls;

 private:
  Kernels& inner_;
};

class RecordingBackend final : public CpuForwardingBackend {
 public:
  std::string name() const override { return "recording cpu"; }
  void synchronize() override {}
  Kernels& kernels() override { return kernels_; }
  RecordingKernels& recorded() { return kernels_; }

 private:
  RecordingKernels kernels_{cpu().kernels()};
};

uintptr_t address(const TensorView& t) { return reinterpret_cast<uintptr_t>(t.data()); }

TEST(RowRoom, ScratchBacksPaddedRowsAndBytesForCountsThem) {
  static_assert(padded_rows(0) == 0 && padded_rows(1) == 4 && padded_rows(4) == 4 && padded_rows(1283) == 1284);
  auto be = make_cpu_backend();
  Scratch s(*be, 1 << 20);
  // 5 rows of 2 KiB: 10 KiB unpadded (256-aligned already), 16 KiB with the room of 8 rows.
  EXPECT_EQ(Scratch::bytes_for(DType::kBF16, 5, 1024), size_t{8 * 2048});
  EXPECT_EQ(Scratch::bytes_for(DType::kBF16, 8, 1024), size_t{8 * 2048});
  EXPECT_EQ(Scratch::bytes_for(DType::kBF16, 0, 1024), size_t{0});
  for (int64_t rows : {5, 8, 1021, 3}) {
    const size_t before = s.mark();
    TensorView a = s.take(DType::kBF16, Shape{rows, 100});
    TensorView b = s.take(DType::kF8E4M3, Shape{1, 1});
    EXPECT_EQ(a.dim(0), rows);
    EXPECT_EQ(s.mark() - before, Scratch::bytes_for(DType::kBF16, rows, 100) + Scratch::bytes_for(DType::kF8E4M3, 1, 1));
    EXPECT_GE(address(b), address(a) + static_cast<size_t>(padded_rows(rows) * 100 * 2)) << rows << " rows";
  }
}

TEST(RowRoom, TakeInputFlagsItsCodesAndInputBytesCountsThem) {
  auto be = make_cpu_backend();
  Scratch s(*be, 1 << 20);
  const InputNeeds needs{ActQuantMode::kGroup128, {}, true};
  const int64_t T = 5, K = 300;
  const size_t before = s.mark();
  LayerInput in = take_input(s, needs, T, K);
  EXPECT_EQ(s.mark() - before, input_bytes(needs, T, K));
  EXPECT_TRUE(in.xq.rows_padded);
  EXPECT_EQ(in.xq.rows(), T);
  EXPECT_EQ(in.xq.scale.dim(1), T);  // the scales keep their pitch of T
  // The codes' padded rows lie before anything taken after them.
  TensorView next = s.take(DType::kBF16, Shape{1, 1});
  EXPECT_GE(address(next), address(in.xq.q) + static_cast<size_t>(padded_rows(T) * K));
  EXPECT_GE(address(in.xq.q), address(in.x) + static_cast<size_t>(padded_rows(T) * K * 2));
}

TEST(RowRoom, ActivationBuffersBackPaddedRows) {
  auto be = make_cpu_backend();
  const int64_t capacity = 5, cols = 256;
  ActivationBuffers bufs(*be, capacity, cols, true);
  EXPECT_EQ(bufs.bytes(), size_t{8 * 256 * 2 + 8 * 256 + 2 * 5 * 4});
  for (int64_t T : {1, 3, 5}) {
    LayerInput in = bufs.view({ActQuantMode::kGroup128, {}, true}, T);
    EXPECT_TRUE(in.xq.rows_padded);
    EXPECT_EQ(in.xq.rows(), T);
    EXPECT_EQ(in.x.dim(0), T);
    EXPECT_EQ(in.xq.scale.dim(1), T);
  }
  EXPECT_THROW(bufs.view(InputNeeds::bf16_only(), capacity + 1), Error);
}

// Linear::forward's outputs come from the arena, and it says so; an FP8 input
// from take_input keeps its flag on the way to the op.
TEST(RowRoom, LinearPassesTheRoomOfItsOutputsAndInputs) {
  RecordingBackend be;
  const auto dir = std::filesystem::path(HYLLM_SOURCE_DIR) / "tests" / "data" / "tiny_models" / "dense_flat_aligned";
  const ModelConfig cfg = load_model_config(dir);
  auto src = open_weights(dir, cfg, LoadFormat::kSafetensors);
  WeightLoader w(be, *src);
  const auto modules = qwen35_quantizable_linears(cfg);
  w.set_online_fp8_modules({modules.begin(), modules.end()});
  const Linear lin = Linear::load(w, {"layers.0.mlp.down_proj"});
  ASSERT_EQ(lin.format(), WeightFormat::kFp8Block);
  Scratch s(be, 1 << 20);
  const int64_t T = 5, K = lin.in_features();
  LayerInput in = take_input(s, {ActQuantMode::kGroup128, {}, true}, T, K);
  for (int64_t i = 0; i < T * K; ++i) in.x.data_as<uint16_t>()[i] = f32_to_bf16(std::sin(0.37f * i));
  quantize_fp8(be, {in.x, in.xq});

  auto& calls = be.recorded().calls;
  size_t before = s.mark();
  lin.forward(be, s, in);
  EXPECT_EQ(s.mark() - before, lin.scratch_bytes(T));
  ASSERT_EQ(calls.size(), size_t{1});
  EXPECT_TRUE(calls[0].out_rows_padded);
  EXPECT_TRUE(calls[0].xq.rows_padded);
  EXPECT_EQ(calls[0].out.dim(0), T);

  // A bf16 input only: the op quantises it itself, into room of its own.
  calls.clear();
  before = s.mark();
  lin.forward(be, s, in.x);
  EXPECT_EQ(s.mark() - before, lin.scratch_bytes(T));
  ASSERT_EQ(calls.size(), size_t{1});
  EXPECT_TRUE(calls[0].out_rows_padded);
  EXPECT_TRUE(calls[0].xq.empty());
}

}  // namespace
}  // namespace hyllm
