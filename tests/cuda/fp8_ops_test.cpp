// Harness: FP8 activations (quantize_fp8 and the producer ops' FP8 outputs)
// and the FP8 linear in both weight formats, on the small-M kernel and on
// cuBLASLt, against the CPU reference on the same quantised bytes.
#include <algorithm>
#include <cstring>
#include <tuple>

#include "cuda_test_util.h"

namespace hyllm::test {
namespace {

// FP8 tensor cores add each instruction's products into the accumulator with
// fewer bits than fp32 (about 2^-14 relative on Hopper); the kernels promote
// partial sums to fp32 every 128 columns, so f32 outputs stay within about
// 1e-4 of the exact FP8 GEMM. bf16 outputs: one rounding on top.
inline constexpr double kTolFp8F32 = 1e-3;
inline constexpr double kTolFp8Bf16 = kOneBf16Step;

TEST_F(CudaOpTest, QuantizeFp8MatchesTheCpuBitForBit) {
  Rng rng(seed_);
  for (auto [T, K] : {std::pair<int64_t, int64_t>{1, 128}, {7, 5120}, {3, 200}, {33, 64}}) {
    HostTensor x = bf16_tensor({T, K + 8});
    x.fill_normal(rng, 3.0);
    x.set(3, 4000.0);
    if (T > 1)  // an all-zero group: the amax floor
      for (int64_t k = 0; k < std::min<int64_t>(K, 128); ++k) x.set((K + 8) + 8 + k, 0.0);
    Mirror dx(*gpu_, x);
    for (ActQuantMode mode : {ActQuantMode::kGroup128, ActQuantMode::kStatic}) {
      Fp8Pair p(*gpu_, mode, T, K, 0.03f);
      quantize_fp8(*cpu_, {ColSlice(x.view(), 8, K), p.host});
      quantize_fp8(*gpu_, {ColSlice(dx.view(), 8, K), p.dev});
      expect_equal("quantize_fp8 codes", *p.dq, p.q);
      expect_equal("quantize_fp8 scales", *p.dscale, p.scale);
    }
  }
}

// The GPU producers' FP8 output is quantize_fp8 of their own bf16 output (bit
// for bit), and that bf16 output is the one the CPU reference gives.
TEST_F(CudaOpTest, Fp8ProducersQuantiseTheirOwnOutput) {
  Rng rng(seed_);
  for (ActQuantMode mode : {ActQuantMode::kGroup128, ActQuantMode::kStatic}) {
    auto check = [&](const char* op, const Mirror& dout, const HostTensor& out, Fp8Pair& fused) {
      expect_close(std::string(op) + " bf16 (fp8 variant)", dout, out, kTolElementwise);
      const TensorView v = dout.view();
      Fp8Pair again(*gpu_, mode, v.dim(0), v.dim(1), 0.03f);
      quantize_fp8(*gpu_, {v, again.dev});
      HostTensor codes(DType::kF8E4M3, {v.dim(0), v.dim(1)});
      gpu_->copy_to_host(codes.buf.data(), fused.dq->view().data(), codes.buf.size());
      codes.v = codes.values();
      expect_equal(std::string(op) + " fp8 codes = quantize_fp8(bf16 out)", *again.dq, codes);
    };
    for (int64_t H : {int64_t{5120}, int64_t{320}, int64_t{100}}) {
      const int64_t T = 1 + rng.integer(0, 20);
      HostTensor x = bf16_tensor({T, H}), w = bf16_tensor({H}), res = bf16_tensor({T, H}), out = bf16_tensor({T, H});
      x.fill_normal(rng, 2.0);
      w.fill_normal(rng, 0.2);
      res.fill_normal(rng, 2.0);
      HostTensor res_cpu = bf16_tensor({T, H});
      for (int64_t i = 0; i < res.numel(); ++i) res_cpu.set(i, res.v[i]);
      rms_norm(*cpu_, {x.view(), w.view(), out.view(), res_cpu.view(), res_cpu.view()});
      Mirror dx(*gpu_, x), dw(*gpu_, w), dres(*gpu_, res), dout(*gpu_, out);
      dout.poison();
      Fp8Pair fused(*gpu_, mode, T, H, 0.03f);
      rms_norm(*gpu_, {dx.view(), dw.view(), dout.view(), dres.view(), dres.view(), 1e-6f, true, fused.dev});
      check("rms_norm", dout, out, fused);
      expect_equal("rms_norm residual (fp8 variant)", dres, res_cpu);
    }
    for (int64_t I : {int64_t{17408 / 8}, int64_t{512}, int64_t{100}}) {
      const int64_t T = 1 + rng.integer(0, 30);
      HostTensor gu = bf16_tensor({T, 2 * I}), out = bf16_tensor({T, I});
      gu.fill_normal(rng, 3.0);
      swiglu(*cpu_, {gu.view(), out.view()});
      Mirror dgu(*gpu_, gu), dout(*gpu_, out);
      dout.poison();
      Fp8Pair fused(*gpu_, mode, T, I, 0.03f);
      swiglu(*gpu_, {dgu.view(), dout.view(), fused.dev});
      check("swiglu", dout, out, fused);
    }
    for (auto [NH, D] : {std::pair<int64_t, int64_t>{48, 128}, {3, 40}}) {
      const int64_t T = 1 + rng.integer(0, 20), W = NH * D;
      HostTensor x = bf16_tensor({T, W}), z = bf16_tensor({T, W}), w = bf16_tensor({D}), out = bf16_tensor({T, W});
      x.fill_normal(rng);
      z.fill_normal(rng, 2.0);
      w.fill_normal(rng, 0.5, 1.0);
      gated_rms_norm(*cpu_, {x.view(), z.view(), w.view(), out.view(), NH, D, 1e-6f});
      Mirror dx(*gpu_, x), dz(*gpu_, z), dw(*gpu_, w), dout(*gpu_, out);
      dout.poison();
      Fp8Pair fused(*gpu_, mode, T, W, 0.03f);
      gated_rms_norm(*gpu_, {dx.view(), dz.view(), dw.view(), dout.view(), NH, D, 1e-6f, fused.dev});
      check("gated_rms_norm", dout, out, fused);
    }
  }
}

struct Fp8Weights {
  HostTensor wq, block_scale, tensor_scale, input_scale;
  std::unique_ptr<Mirror> dwq, dblock, dtensor, dinput;
  Fp8Weights(Backend& gpu, Rng& rng, int64_t N, int64_t K)
      : wq(DType::kF8E4M3, {N, K}),
        block_scale(DType::kF32, {(N + 127) / 128, (K + 127) / 128}),
        tensor_scale(DType::kF32, {1}),
        input_scale(DType::kF32, {1}) {
    wq.fill_normal(rng, 100.0);  // spans the e4m3 range, subnormals included
    block_scale.fill_uniform(rng, 1e-4, 1e-3);
    tensor_scale.set(0, 4e-4);
    input_scale.set(0, 0.01);
    dwq = std::make_unique<Mirror>(gpu, wq);
    dblock = std::make_unique<Mirror>(gpu, block_scale);
    dtensor = std::make_unique<Mirror>(gpu, tensor_scale);
    dinput = std::make_unique<Mirror>(gpu, input_scale);
  }
  LinearWeight host(WeightFormat f) const {
    return f == WeightFormat::kFp8Block ? LinearWeight::fp8_block(wq.view(), block_scale.view())
                                        : LinearWeight::fp8_tensor(wq.view(), tensor_scale.view(), input_scale.view());
  }
  LinearWeight dev(WeightFormat f) const {
    return f == WeightFormat::kFp8Block ? LinearWeight::fp8_block(dwq->view(), dblock->view())
                                        : LinearWeight::fp8_tensor(dwq->view(), dtensor->view(), dinput->view());
  }
};

// Decode rows on the small-M kernel (M <= 32, chunks of 32 beyond when
// cuBLASLt declines), prefill rows on cuBLASLt; K not a multiple of 128
// (a partial scale block), of 16 (the register-tile kernel); N not a multiple
// of 16; real 27B and 35B-A3B widths (row blocks whose K blocks are split
// across a cluster of the TMA kernel's blocks, at 1, 24 and 32 rows: the
// partial sums of up to 8 blocks meeting in each warp's owner block); 9..40
// rows on the TMA kernel where cuBLASLt's block-scaled kernels are not taken
// (N % 128 != 0); row counts that cuBLASLt's block-scaled kernels refuse (not
// a multiple of kFp8BlockRowMultiple), in views without row room: the
// leading rows on cuBLASLt, the rest on fp8_gemv.
TEST_F(CudaOpTest, LinearFp8BothFormats) {
  Rng rng(seed_);
  struct Shape3 {
    int64_t M, N, K;
  };
  for (const Shape3 s : {Shape3{1, 256, 128}, Shape3{1, 5120, 6144}, Shape3{2, 12288, 2048}, Shape3{5, 100, 320},
                         Shape3{8, 1024, 5120}, Shape3{16, 640, 512}, Shape3{31, 384, 256}, Shape3{32, 2048, 4096},
                         Shape3{3, 96, 200}, Shape3{40, 200, 200}, Shape3{33, 256, 384}, Shape3{300, 1024, 1024},
                         Shape3{1024, 768, 2048}, Shape3{131, 512, 128}, Shape3{263, 256, 128}, Shape3{300, 1280, 320},
                         Shape3{131, 768, 320}, Shape3{64, 512, 128}, Shape3{1, 34816, 512},
                         Shape3{3, 20480, 256}, Shape3{2, 3200, 1024}, Shape3{4, 1600, 2048},
                         Shape3{20, 8200, 2048}, Shape3{40, 8200, 2048}, Shape3{1283, 1024, 2048},
                         Shape3{45, 2048, 1024}, Shape3{24, 5120, 6144}, Shape3{32, 5120, 6144}}) {
    SCOPED_TRACE(testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K);
    HostTensor x = bf16_tensor({s.M, s.K});
    x.fill_normal(rng);
    for (int64_t i = 0; i < x.numel(); i += 29) x.set(i, rng.normal(20.0));  // outliers set group scales
    Mirror dx(*gpu_, x);
    Fp8Weights w(*gpu_, rng, s.N, s.K);
    for (WeightFormat f : {WeightFormat::kFp8Block, WeightFormat::kFp8Tensor}) {
      const ActQuantMode mode = act_quant_mode_for(f);
      const std::string name = std::string("linear ") + weight_format_name(f) + (s.M <= 32 ? " small-M" : " gemm");
      // The CPU quantises its bf16 input itself; the GPU reads codes made by
      // quantize_fp8 (bit-identical to the CPU's, see above).
      Fp8Pair xq(*gpu_, mode, s.M, s.K, 0.0f);
      if (mode == ActQuantMode::kStatic) xq.dev.scale = w.dinput->view();
      quantize_fp8(*gpu_, {dx.view(), xq.dev});
      for (DType od : {DType::kBF16, DType::kF32}) {
        HostTensor out(od, {s.M, s.N});
        linear(*cpu_, {x.view(), w.host(f), out.view()});
        Mirror dout(*gpu_, out);
        run_gpu_poisoned([&] { linear(*gpu_, {{}, w.dev(f), dout.view(), xq.dev}); }, {&dout});
        expect_close(name + (od == DType::kF32 ? " f32" : " bf16"), dout, out,
                     od == DType::kF32 ? kTolFp8F32 : kTolFp8Bf16);
        if (od == DType::kBF16) {
          // A bf16 input: the linear quantises it itself.
          Mirror dself(*gpu_, out);
          run_gpu_poisoned([&] { linear(*gpu_, {dx.view(), w.dev(f), dself.view()}); }, {&dself});
          expect_close(name + " (self-quantised)", dself, out, kTolFp8Bf16);
        }
      }
    }
  }
}

// Every launch plan the TMA decode linear takes from its measured table
// (fp8_gemv_tma_plans.inc: cluster sizes up to 8 that split K unevenly,
// shared memory padded past the kernel's own), at the fewest rows of each
// token-tile count, against the CPU reference.
TEST_F(CudaOpTest, LinearFp8MeasuredPlans) {
  struct PlanRow {
    int n, k, nt, cluster, per_sm;
  };
  constexpr PlanRow kPlans[] = {
#include "backend/cuda/fp8_gemv_tma_plans.inc"
  };
  Rng rng(seed_);
  for (const PlanRow& plan : kPlans) {
    const int64_t M = (plan.nt - 1) * 8 + 1, N = plan.n, K = plan.k;
    SCOPED_TRACE(testing::Message() << "M=" << M << " N=" << N << " K=" << K);
    HostTensor x = bf16_tensor({M, K});
    x.fill_normal(rng);
    Mirror dx(*gpu_, x);
    Fp8Weights w(*gpu_, rng, N, K);
    Fp8Pair xq(*gpu_, ActQuantMode::kGroup128, M, K, 0.0f);
    quantize_fp8(*gpu_, {dx.view(), xq.dev});
    HostTensor out(DType::kF32, {M, N});
    linear(*cpu_, {x.view(), w.host(WeightFormat::kFp8Block), out.view()});
    Mirror dout(*gpu_, out);
    run_gpu_poisoned([&] { linear(*gpu_, {{}, w.dev(WeightFormat::kFp8Block), dout.view(), xq.dev}); }, {&dout});
    expect_close("linear fp8-block, measured plan", dout, out, kTolFp8F32);
  }
}

// Block-FP8 row counts that cuBLASLt's block-scaled kernels refuse, with the
// row room of ops.h's kActivationRowPad (codes and output backed for
// padded_rows(M) rows, flagged): one GEMM over the rows rounded up, which
// zeroes the room's codes first (they hold zeros or NaNs before each run) and
// so writes zeros into the output's room (which shows that the GEMM ran over
// it) and nothing past it, and leaves the activation's scales as they were.
// Without both flags the same rows take the split (or fp8_gemv alone), which
// writes no row past M.
TEST_F(CudaOpTest, LinearFp8BlockRowRoom) {
  Rng rng(seed_);
  struct Shape3 {
    int64_t M, N, K;
  };
  enum class Room { kBoth, kCodesOnly, kNone };
  for (const Shape3 s : {Shape3{1283, 1024, 2048}, Shape3{45, 2048, 1024}, Shape3{1021, 512, 4096},
                         Shape3{37, 1024, 512}}) {
    SCOPED_TRACE(testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K);
    const int64_t M = s.M, N = s.N, K = s.K, Mp = padded_rows(M);
    ASSERT_NE(M, Mp);
    HostTensor x = bf16_tensor({M, K});
    x.fill_normal(rng);
    for (int64_t i = 0; i < x.numel(); i += 29) x.set(i, rng.normal(20.0));
    Mirror dx(*gpu_, x);
    Fp8Weights w(*gpu_, rng, N, K);
    const LinearWeight dw = w.dev(WeightFormat::kFp8Block);
    for (DType od : {DType::kBF16, DType::kF32}) {
      HostTensor want(od, {M, N});
      linear(*cpu_, {x.view(), w.host(WeightFormat::kFp8Block), want.view()});
      const std::string name = std::string("linear fp8-block row room") + (od == DType::kF32 ? " f32" : " bf16");
      const double tol = od == DType::kF32 ? kTolFp8F32 : kTolFp8Bf16;
      // The output's room, and one row past it: the canary.
      HostTensor out_room(od, {Mp + 1, N});
      Mirror dout(*gpu_, out_room);
      const TensorView out = dout.view().slice_rows(0, M);
      // Rows below M against the CPU; with `room`, rows [M, Mp) zero; every
      // byte from the first row the run may not write on still poison.
      auto check = [&](const std::string& what, bool room) {
        const HostTensor got = dout.download();
        std::vector<double> rows_below_m(static_cast<size_t>(M * N));
        for (int64_t i = 0; i < M * N; ++i) rows_below_m[i] = got.get(i);
        expect_close(what, rows_below_m, want, tol);
        if (room) {
          int64_t zero = M * N;
          while (zero < Mp * N && got.get(zero) == 0.0) ++zero;
          EXPECT_EQ(zero, Mp * N) << what << ": the room's rows did not come out zero from the GEMM";
        }
        const auto* bytes = got.buf.data_as<const uint8_t>();
        size_t changed = static_cast<size_t>((room ? Mp : M) * N) * dtype_size(od);
        while (changed < got.buf.size() && bytes[changed] == 0xff) ++changed;
        EXPECT_EQ(changed, got.buf.size()) << what << ": a byte past the rows the run may write changed";
      };
      for (const uint8_t room_code : {uint8_t{0x00}, uint8_t{0xff}}) {
        SCOPED_TRACE(testing::Message() << "room codes " << static_cast<int>(room_code));
        HostTensor q_room(DType::kF8E4M3, {Mp, K}), scale(DType::kF32, {(K + 127) / 128, M});
        std::memset(q_room.buf.data(), room_code, q_room.buf.size());
        Mirror dq(*gpu_, q_room), dscale(*gpu_, scale);
        Fp8Activation xq{ActQuantMode::kGroup128, dq.view().slice_rows(0, M), dscale.view()};
        for (Room room : {Room::kBoth, Room::kCodesOnly, Room::kNone}) {
          SCOPED_TRACE(testing::Message() << "room " << static_cast<int>(room));
          xq.rows_padded = room != Room::kNone;
          const LinearArgs a{{}, dw, out, xq, room == Room::kBoth};
          linear(*gpu_, a);  // sizes the scratch
          cuda_poison_scratch(*gpu_, 0x7f);
          dout.poison();
          dq.upload();  // the room's codes as they were
          quantize_fp8(*gpu_, {dx.view(), xq});
          const HostTensor scales_before = dscale.download();
          linear(*gpu_, a);
          check(name, room == Room::kBoth);
          const HostTensor scales_after = dscale.download();
          EXPECT_EQ(std::memcmp(scales_before.buf.data(), scales_after.buf.data(), scales_before.buf.size()), 0)
              << "the activation's scales changed";
        }
      }
      // A bf16 input: the linear quantises it into codes with room of its own
      // (poisoned scratch: NaN codes in the room until the op zeroes them).
      run_gpu_poisoned([&] { linear(*gpu_, {dx.view(), dw, out, {}, true}); }, {&dout});
      check(name + " (self-quantised)", true);
    }
  }
}

}  // namespace
}  // namespace hyllm::test
