// Harness: linear, embedding, gather_rows, rms_norm, gated_rms_norm, swiglu.
#include <array>

#include "cuda_test_util.h"

namespace hyllm::test {
namespace {

TEST_F(CudaOpTest, LinearBf16) {
  Rng rng(seed_);
  struct Shape3 {
    int64_t M, N, K;
  };
  // Decode and prefill rows, tiny-model and real-model widths, odd sizes.
  // Up to 8 rows and 4096 outputs run on bf16_gemv (the GDN b|a and 35B-A3B
  // o_proj/out_proj decode shapes among them), the rest on cuBLASLt, as do a
  // K that is not a multiple of 8 and an x of more than 96 KB.
  for (const Shape3 s : {Shape3{1, 256, 128}, Shape3{3, 96, 64}, Shape3{8, 1024, 320}, Shape3{32, 640, 512},
                         Shape3{77, 200, 136}, Shape3{300, 512, 1024}, Shape3{1, 5120, 5120}, Shape3{1, 96, 5120},
                         Shape3{1, 2048, 4096}, Shape3{4, 64, 2048}, Shape3{8, 4096, 1024}, Shape3{5, 100, 8200},
                         Shape3{2, 50, 100}, Shape3{9, 96, 512}, Shape3{1, 64, 16384}, Shape3{8, 256, 8192}}) {
    SCOPED_TRACE(testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K);
    HostTensor x = bf16_tensor({s.M, s.K}), w = bf16_tensor({s.N, s.K});
    x.fill_normal(rng);
    w.fill_normal(rng, 0.05);
    for (DType out_dtype : {DType::kBF16, DType::kF32}) {
      HostTensor out(out_dtype, {s.M, s.N});
      linear(*cpu_, {x.view(), LinearWeight::bf16(w.view()), out.view()});
      Mirror dx(*gpu_, x), dw(*gpu_, w), dout(*gpu_, out);
      dout.poison();
      linear(*gpu_, {dx.view(), LinearWeight::bf16(dw.view()), dout.view()});
      if (out_dtype == DType::kBF16) {
        expect_close("linear bf16", dout, out, kTolGemm);
      } else {
        expect_close("linear f32 out", dout, out, kTolF32Gemm);
      }
    }
  }
}

// The output buffer is fresh device memory that nothing wrote before the GEMM
// (the test above poisons it first). Under compute-sanitizer's initcheck this
// tells whether the tool sees the library GEMM's writes: the model's next op
// reads such an output, and the copy to the host here reads all of it.
TEST_F(CudaOpTest, LinearBf16IntoFreshMemory) {
  Rng rng(seed_);
  for (const auto [M, N, K] : {std::array<int64_t, 3>{7, 512, 128}, std::array<int64_t, 3>{300, 512, 1024}}) {
    SCOPED_TRACE(testing::Message() << "M=" << M << " N=" << N << " K=" << K);
    HostTensor x = bf16_tensor({M, K}), w = bf16_tensor({N, K}), out = bf16_tensor({M, N});
    x.fill_normal(rng);
    w.fill_normal(rng, 0.05);
    linear(*cpu_, {x.view(), LinearWeight::bf16(w.view()), out.view()});
    Mirror dx(*gpu_, x), dw(*gpu_, w);
    DeviceBuffer dout(*gpu_, DType::kBF16, Shape{M, N});
    linear(*gpu_, {dx.view(), LinearWeight::bf16(dw.view()), dout.view()});
    HostTensor back = bf16_tensor({M, N});
    gpu_->copy_to_host(back.buf.data(), dout.data(), back.buf.size());
    const double err = normalized_error(back.values(), out.values());
    EXPECT_LE(err, kTolGemm);
  }
}

TEST_F(CudaOpTest, EmbeddingAndGatherRows) {
  Rng rng(seed_);
  const int64_t V = 300, H = 72, T = 9;
  HostTensor table = bf16_tensor({V, H});
  table.fill_normal(rng);
  std::vector<int64_t> id_list;
  for (int64_t t = 0; t < T; ++t) id_list.push_back(rng.integer(0, V - 1));
  HostTensor ids = i32_tensor(id_list), out = bf16_tensor({T, H});
  embedding(*cpu_, {ids.view(), table.view(), out.view()});
  Mirror dids(*gpu_, ids), dtable(*gpu_, table), dout(*gpu_, out);
  dout.poison();
  embedding(*gpu_, {dids.view(), dtable.view(), dout.view()});
  expect_equal("embedding", dout, out);

  for (DType dt : {DType::kBF16, DType::kF32}) {
    HostTensor src(dt, {T, 13});
    src.fill_normal(rng);
    HostTensor idx = i32_tensor({4, 0, 8, 4}), rows(dt, {4, 13});
    gather_rows(*cpu_, {src.view(), idx.view(), rows.view()});
    Mirror dsrc(*gpu_, src), didx(*gpu_, idx), drows(*gpu_, rows);
    drows.poison();
    gather_rows(*gpu_, {dsrc.view(), didx.view(), drows.view()});
    expect_equal("gather_rows", drows, rows);
  }
}

TEST_F(CudaOpTest, RmsNormVariants) {
  Rng rng(seed_);
  for (int64_t H : {64, 320, 2048, 5120, 100}) {
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(testing::Message() << "H=" << H << " variant=" << variant);
      // One variant of each width at a prefill-sized row count.
      const int64_t T = variant == 1 ? 300 : 1 + rng.integer(0, 40);
      const bool residual = variant >= 1, in_place = variant == 2, f32_weight = variant == 3;
      HostTensor x = bf16_tensor({T, H}), w(f32_weight ? DType::kF32 : DType::kBF16, {H});
      HostTensor res = bf16_tensor({T, H}), res_out = bf16_tensor({T, H}), out = bf16_tensor({T, H});
      x.fill_normal(rng, 2.0);
      w.fill_normal(rng, 0.2);
      res.fill_normal(rng, 2.0);
      Mirror dx(*gpu_, x), dw(*gpu_, w), dres(*gpu_, res), dres_out(*gpu_, res_out), dout(*gpu_, out);
      dout.poison();
      dres_out.poison();
      RmsNormArgs ca{x.view(), w.view(), out.view(), {}, {}, 1e-6f, variant != 3};
      RmsNormArgs ga{dx.view(), dw.view(), dout.view(), {}, {}, 1e-6f, variant != 3};
      if (residual) {
        ca.residual_in = res.view();
        ga.residual_in = dres.view();
        ca.residual_out = in_place ? res.view() : res_out.view();
        ga.residual_out = in_place ? dres.view() : dres_out.view();
      }
      rms_norm(*cpu_, ca);
      rms_norm(*gpu_, ga);
      expect_close("rms_norm out", dout, out, kTolElementwise);
      if (residual && in_place) expect_equal("rms_norm residual (in place)", dres, res);
      if (residual && !in_place) expect_equal("rms_norm residual", dres_out, res_out);
    }
  }
}

TEST_F(CudaOpTest, GatedRmsNorm) {
  Rng rng(seed_);
  for (int64_t D : {16, 24, 64, 128}) {
    const int64_t NH = 1 + rng.integer(0, 5), T = 1 + rng.integer(0, 30), W = NH * D;
    HostTensor x = bf16_tensor({T, W}), zbig = bf16_tensor({T, W + 40}), w = bf16_tensor({D}), out = bf16_tensor({T, W});
    x.fill_normal(rng);
    zbig.fill_normal(rng, 2.0);
    w.fill_normal(rng, 0.5, 1.0);
    gated_rms_norm(*cpu_, {x.view(), ColSlice(zbig.view(), 24, W), w.view(), out.view(), NH, D, 1e-6f});
    Mirror dx(*gpu_, x), dz(*gpu_, zbig), dw(*gpu_, w), dout(*gpu_, out);
    dout.poison();
    gated_rms_norm(*gpu_, {dx.view(), ColSlice(dz.view(), 24, W), dw.view(), dout.view(), NH, D, 1e-6f});
    expect_close("gated_rms_norm", dout, out, kTolElementwise);
  }
}

TEST_F(CudaOpTest, Swiglu) {
  Rng rng(seed_);
  for (int64_t I : {24, 96, 17408 / 8, 100}) {
    const int64_t T = 1 + rng.integer(0, 50);
    for (int64_t extra : {int64_t{0}, int64_t{16}}) {
      HostTensor x = bf16_tensor({T, 2 * I + extra}), out = bf16_tensor({T, I});
      x.fill_normal(rng, 3.0);
      swiglu(*cpu_, {ColSlice(x.view(), extra, 2 * I), out.view()});
      Mirror dx(*gpu_, x), dout(*gpu_, out);
      dout.poison();
      swiglu(*gpu_, {ColSlice(dx.view(), extra, 2 * I), dout.view()});
      expect_close("swiglu", dout, out, kTolElementwise);
    }
  }
}

}  // namespace
}  // namespace hyllm::test
