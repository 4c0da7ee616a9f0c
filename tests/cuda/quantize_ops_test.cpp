// Harness: quantize_weight_fp8 (online FP8 weights) gives the CPU reference's
// codes and scale bit for bit: the amax is exact, the division IEEE and the
// e4m3 conversion shared.
#include <cstring>

#include "cuda_test_util.h"

namespace hyllm::test {
namespace {

TEST_F(CudaOpTest, QuantizeWeightFp8IsBitIdentical) {
  Rng rng(seed_);
  struct Case {
    int64_t n, k;
    Shape scale;
    double sd;
  };
  for (const Case& c : {Case{1, 1, Shape{1}, 1.0}, Case{128, 320, Shape{1, 3}, 0.02}, Case{1000, 77, Shape{8, 1}, 3.0},
                       Case{3072, 2048, Shape{24, 16}, 0.05}}) {
    SCOPED_TRACE(testing::Message() << c.n << "x" << c.k);
    HostTensor w = bf16_tensor({c.n, c.k});
    w.fill_normal(rng, c.sd);
    if (c.n * c.k > 10) {
      w.set(3, NAN);  // skipped by the amax, a NaN code
      w.set(7, -40.0 * c.sd);  // the amax: code -448
    }
    HostTensor out(DType::kF8E4M3, {c.n, c.k}), scale(DType::kF32, c.scale);
    quantize_weight_fp8(*cpu_, {w.view(), out.view(), scale.view()});
    Mirror dw(*gpu_, w), dout(*gpu_, out), dscale(*gpu_, scale);
    run_gpu_poisoned([&] { quantize_weight_fp8(*gpu_, {dw.view(), dout.view(), dscale.view()}); }, {&dout, &dscale});
    HostTensor got(DType::kF8E4M3, {c.n, c.k}), got_scale(DType::kF32, c.scale);
    gpu_->copy_to_host(got.buf.data(), dout.view().data(), got.buf.size());
    gpu_->copy_to_host(got_scale.buf.data(), dscale.view().data(), got_scale.buf.size());
    EXPECT_EQ(std::memcmp(got.buf.data(), out.buf.data(), out.buf.size()), 0) << "codes";
    EXPECT_EQ(std::memcmp(got_scale.buf.data(), scale.buf.data(), scale.buf.size()), 0) << "scale";
  }
}

}  // namespace
}  // namespace hyllm::test
