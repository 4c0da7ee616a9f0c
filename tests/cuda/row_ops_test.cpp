// Harness: the per-row kernels (rms_norm, gated_rms_norm, swiglu,
// quantize_fp8) at decode row counts (1, 3, 32) and the real widths of the
// 27B (hidden 5120, intermediate 17408, GDN 48 heads x 128) and 35B-A3B
// (hidden 2048, shared-expert intermediate 512) models, plus the shapes their
// launches must still handle: widths not a multiple of 8, columns not a
// multiple of 128, strided and misaligned inputs, wide rows, many rows.
#include <functional>

#include "cuda_test_util.h"

namespace hyllm::test {
namespace {

constexpr int64_t kDecodeRows[] = {1, 3, 32};

// An FP8 producer: runs the GPU op with the given bf16 output (maybe empty)
// and FP8 output.
using Fp8Producer = std::function<void(const TensorView& out, const Fp8Activation& fp8)>;

class RowOpsTest : public CudaOpTest {
 protected:
  // The op's FP8 output, in both modes, equals quantize_fp8 of its own bf16
  // output, codes and scales; its bf16 output is the CPU's `out`; an FP8-only
  // launch (no bf16 output) writes the same bytes.
  void check_fp8_producer(const std::string& op, const HostTensor& out, const Fp8Producer& run) {
    const int64_t T = out.view().dim(0), K = out.view().dim(1);
    for (ActQuantMode mode : {ActQuantMode::kGroup128, ActQuantMode::kStatic}) {
      SCOPED_TRACE(mode == ActQuantMode::kGroup128 ? "group scales" : "static scale");
      HostTensor out_copy = bf16_tensor({T, K});
      Mirror dout(*gpu_, out_copy);
      dout.poison();
      Fp8Pair fused(*gpu_, mode, T, K, 0.03f), alone(*gpu_, mode, T, K, 0.03f), again(*gpu_, mode, T, K, 0.03f);
      run(dout.view(), fused.dev);
      expect_close(op + " bf16 (fp8 variant)", dout, out, kTolElementwise);
      quantize_fp8(*gpu_, {dout.view(), again.dev});
      run({}, alone.dev);
      const HostTensor codes = fused.dq->download();
      expect_equal(op + " fp8 codes = quantize_fp8(bf16 out)", *again.dq, codes);
      expect_equal(op + " fp8 codes without a bf16 out", *alone.dq, codes);
      if (mode == ActQuantMode::kGroup128) {
        const HostTensor scales = fused.dscale->download();
        expect_equal(op + " fp8 scales = quantize_fp8(bf16 out)", *again.dscale, scales);
        expect_equal(op + " fp8 scales without a bf16 out", *alone.dscale, scales);
      }
    }
  }
};

// With a residual (written to a separate buffer, so the op can run again):
// the register form at decode rows (widths up to 3 chunks of 8 per thread of
// 1024), the shared-memory form for many rows, the scalar form for widths not
// a multiple of 8.
TEST_F(RowOpsTest, RmsNormAtDecodeShapes) {
  Rng rng(seed_);
  struct Case {
    int64_t T, H;
    bool f32_weight;
  };
  std::vector<Case> cases;
  for (int64_t T : kDecodeRows)
    for (int64_t H : {5120, 2048, 320, 100}) cases.push_back({T, H, false});
  cases.push_back({3, 12288, true});
  cases.push_back({2, 24576, false});
  cases.push_back({300, 5120, false});
  cases.push_back({1, 4104, true});
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "T=" << c.T << " H=" << c.H << (c.f32_weight ? " f32 weight" : ""));
    HostTensor x = bf16_tensor({c.T, c.H}), w(c.f32_weight ? DType::kF32 : DType::kBF16, {c.H});
    HostTensor res = bf16_tensor({c.T, c.H}), res_out = bf16_tensor({c.T, c.H}), out = bf16_tensor({c.T, c.H});
    x.fill_normal(rng, 2.0);
    w.fill_normal(rng, 0.2);
    res.fill_normal(rng, 2.0);
    rms_norm(*cpu_, {x.view(), w.view(), out.view(), res.view(), res_out.view()});
    Mirror dx(*gpu_, x), dw(*gpu_, w), dres(*gpu_, res), dres_out(*gpu_, res_out), dout(*gpu_, out);
    dout.poison();
    dres_out.poison();
    rms_norm(*gpu_, {dx.view(), dw.view(), dout.view(), dres.view(), dres_out.view()});
    expect_close("rms_norm out (decode shapes)", dout, out, kTolElementwise);
    expect_equal("rms_norm residual (decode shapes)", dres_out, res_out);
    check_fp8_producer("rms_norm (decode shapes)", out, [&](const TensorView& o, const Fp8Activation& q) {
      rms_norm(*gpu_, {dx.view(), dw.view(), o, dres.view(), dres_out.view(), 1e-6f, true, q});
    });
    expect_equal("rms_norm residual (decode shapes, fp8)", dres_out, res_out);
  }
}

// z a column slice of a wider tensor (as in_proj's output), at an offset that
// keeps 8-byte loads aligned and at one that does not.
TEST_F(RowOpsTest, GatedRmsNormAtDecodeShapes) {
  Rng rng(seed_);
  struct Case {
    int64_t T, NH, D, z_offset;
    bool f32_weight;
  };
  std::vector<Case> cases;
  for (int64_t T : kDecodeRows) {
    cases.push_back({T, 48, 128, 24, false});
    cases.push_back({T, 32, 128, 8, true});
  }
  cases.push_back({3, 6, 256, 3, false});  // two groups per head
  cases.push_back({3, 5, 40, 24, false});  // a group spans heads: the block form
  cases.push_back({32, 3, 18, 3, true});   // head_dim not a multiple of 4
  cases.push_back({200, 48, 128, 24, false});
  cases.push_back({3, 5, 128, 24, false});  // an odd number of heads in all: half a warp idle
  cases.push_back({5, 2, 512, 8, true});    // four groups per head
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "T=" << c.T << " heads=" << c.NH << " head_dim=" << c.D
                                    << " z offset=" << c.z_offset << (c.f32_weight ? " f32 weight" : ""));
    const int64_t W = c.NH * c.D;
    HostTensor x = bf16_tensor({c.T, W}), zbig = bf16_tensor({c.T, W + 40}), out = bf16_tensor({c.T, W});
    HostTensor w(c.f32_weight ? DType::kF32 : DType::kBF16, {c.D});
    x.fill_normal(rng);
    zbig.fill_normal(rng, 2.0);
    w.fill_normal(rng, 0.5, 1.0);
    gated_rms_norm(*cpu_, {x.view(), ColSlice(zbig.view(), c.z_offset, W), w.view(), out.view(), c.NH, c.D, 1e-6f});
    Mirror dx(*gpu_, x), dz(*gpu_, zbig), dw(*gpu_, w), dout(*gpu_, out);
    const ColSlice z(dz.view(), c.z_offset, W);
    dout.poison();
    gated_rms_norm(*gpu_, {dx.view(), z, dw.view(), dout.view(), c.NH, c.D, 1e-6f});
    expect_close("gated_rms_norm (decode shapes)", dout, out, kTolElementwise);
    check_fp8_producer("gated_rms_norm (decode shapes)", out, [&](const TensorView& o, const Fp8Activation& q) {
      gated_rms_norm(*gpu_, {dx.view(), z, dw.view(), o, c.NH, c.D, 1e-6f, q});
    });
  }
}

// x a column slice [gate | up] of a wider tensor, aligned and misaligned.
TEST_F(RowOpsTest, SwigluAtDecodeShapes) {
  Rng rng(seed_);
  struct Case {
    int64_t T, I, offset, extra = 5;  // x is [T, offset + 2 I + extra]
  };
  std::vector<Case> cases;
  for (int64_t T : kDecodeRows)
    for (int64_t I : {17408, 512, 200}) cases.push_back({T, I, 8});
  cases.push_back({3, 99, 3});
  cases.push_back({32, 512, 1});
  cases.push_back({300, 1024, 0});
  cases.push_back({96, 17408, 8});  // two items per warp
  cases.push_back({600, 17408, 0, 0});  // prefill rows, aligned: four items per warp
  cases.push_back({257, 1000, 8, 0});   // four items per warp; a row is not a whole number of items
  cases.push_back({300, 17408, 4});     // prefill rows, misaligned: two items per warp
  cases.push_back({100, 200, 3});
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "T=" << c.T << " I=" << c.I << " offset=" << c.offset);
    HostTensor x = bf16_tensor({c.T, 2 * c.I + c.offset + c.extra}), out = bf16_tensor({c.T, c.I});
    x.fill_normal(rng, 3.0);
    swiglu(*cpu_, {ColSlice(x.view(), c.offset, 2 * c.I), out.view()});
    Mirror dx(*gpu_, x), dout(*gpu_, out);
    const ColSlice gu(dx.view(), c.offset, 2 * c.I);
    dout.poison();
    swiglu(*gpu_, {gu, dout.view()});
    expect_close("swiglu (decode shapes)", dout, out, kTolElementwise);
    check_fp8_producer("swiglu (decode shapes)", out,
                       [&](const TensorView& o, const Fp8Activation& q) { swiglu(*gpu_, {gu, o, q}); });
  }
}

// Bit for bit against the CPU, codes and scales.
TEST_F(RowOpsTest, QuantizeFp8AtDecodeShapes) {
  Rng rng(seed_);
  struct Case {
    int64_t T, K, offset;
  };
  std::vector<Case> cases;
  for (int64_t T : kDecodeRows)
    for (int64_t K : {5120, 6144, 2048}) cases.push_back({T, K, 8});
  cases.push_back({3, 200, 8});
  cases.push_back({32, 99, 3});
  cases.push_back({1, 130, 1});
  cases.push_back({300, 1024, 0});
  cases.push_back({100, 130, 1});
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "T=" << c.T << " K=" << c.K << " offset=" << c.offset);
    HostTensor x = bf16_tensor({c.T, c.K + c.offset + 5});
    x.fill_normal(rng, 3.0);
    Mirror dx(*gpu_, x);
    for (ActQuantMode mode : {ActQuantMode::kGroup128, ActQuantMode::kStatic}) {
      Fp8Pair p(*gpu_, mode, c.T, c.K, 0.03f);
      quantize_fp8(*cpu_, {ColSlice(x.view(), c.offset, c.K), p.host});
      quantize_fp8(*gpu_, {ColSlice(dx.view(), c.offset, c.K), p.dev});
      expect_equal("quantize_fp8 codes (decode shapes)", *p.dq, p.q);
      expect_equal("quantize_fp8 scales (decode shapes)", *p.dscale, p.scale);
    }
  }
}

}  // namespace
}  // namespace hyllm::test
