// linear in all three weight formats against double references, and the fp8
// formats bit-for-bit against an exact FP8 GEMM computed here in integers.
#include <algorithm>

#include "ops_test_util.h"

namespace hyllm::test {
namespace {

struct LinearCase {
  int64_t M, K, N;
};

// Sum over k of |x||w| per output: the scale of accumulation error.
std::vector<double> abs_dot(const HostTensor& x, const std::vector<double>& w, int64_t M, int64_t K, int64_t N) {
  std::vector<double> r(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) r[m * N + n] += std::fabs(x.v[m * K + k] * w[n * K + k]);
  return r;
}

TEST(Linear, Bf16MatchesDoubleReference) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  // M covers the GEMV path (<= 16 rows, odd and even) and the sgemm path (weight
  // tiles of 512 rows, row chunks); K and N are not
  // multiples of the vector width or the tile; 600 rows cross a row tile.
  for (LinearCase c : {LinearCase{1, 64, 48}, {3, 200, 130}, {4, 33, 7}, {5, 200, 130}, {70, 40, 1100}, {37, 96, 200}, {600, 40, 24}}) {
    HostTensor x = bf16_tensor({c.M, c.K}), w = bf16_tensor({c.N, c.K});
    x.fill_normal(rng);
    w.fill_normal(rng, 0.1);
    std::vector<double> ref(static_cast<size_t>(c.M * c.N), 0.0);
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n)
        for (int64_t k = 0; k < c.K; ++k) ref[m * c.N + n] += x.v[m * c.K + k] * w.v[n * c.K + k];
    const auto mag = abs_dot(x, w.v, c.M, c.K, c.N);
    for (DType od : {DType::kBF16, DType::kF32}) {
      HostTensor out(od, {c.M, c.N});
      out.poison();
      linear(*be, {x.view(), LinearWeight::bf16(w.view()), out.view()});
      // f32: accumulation error only (1e-6 of sum |x w|); bf16: plus one rounding (2^-8 relative).
      for (int64_t i = 0; i < c.M * c.N; ++i) {
        const double tol = 1e-6 * mag[i] + (od == DType::kBF16 ? std::ldexp(std::fabs(ref[i]), -8) : 0.0);
        ASSERT_NEAR(out.get(i), ref[i], tol) << "M=" << c.M << " K=" << c.K << " N=" << c.N << " i=" << i;
      }
    }
  }
}

// The activation quantisation of ops.h, written out independently.
double quantize(double x_over_scale) {
  const float v = std::clamp(static_cast<float>(x_over_scale), -448.0f, 448.0f);
  return f8e4m3_to_f32(f32_to_f8e4m3(v));
}

// Exact sum of products of e4m3 values: every e4m3 value is an integer
// multiple of 2^-9, so the products are integers times 2^-18.
double exact_fp8_dot(const double* a, const double* b, int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += static_cast<int64_t>(std::ldexp(a[i], 9)) * static_cast<int64_t>(std::ldexp(b[i], 9));
  }
  return std::ldexp(static_cast<double>(s), -18);
}

TEST(Linear, Fp8BlockIsAnExactFp8GemmAndNearTheDequantisedProduct) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  for (LinearCase c : {LinearCase{1, 256, 128}, {3, 300, 200}, {9, 128, 260}}) {
    const int64_t nbn = (c.N + 127) / 128, nbk = (c.K + 127) / 128;
    HostTensor x = bf16_tensor({c.M, c.K}), wq(DType::kF8E4M3, {c.N, c.K}), ws = f32_tensor({nbn, nbk});
    x.fill_normal(rng);
    for (int64_t i = 0; i < x.numel(); i += 17) x.set(i, rng.normal(20.0));  // outliers set group scales
    wq.fill_normal(rng, 100.0);  // spans the e4m3 range, subnormals included
    ws.fill_uniform(rng, 1e-4, 1e-3);
    // Exact FP8 GEMM in the order ops.h states.
    std::vector<double> exact(static_cast<size_t>(c.M * c.N)), deq(exact.size());
    std::vector<double> xq(static_cast<size_t>(c.K));
    for (int64_t m = 0; m < c.M; ++m) {
      std::vector<float> xs(static_cast<size_t>(nbk));
      for (int64_t j = 0; j < nbk; ++j) {
        const int64_t k0 = j * 128, k1 = std::min(c.K, k0 + 128);
        float amax = 0.0f;
        for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, static_cast<float>(std::fabs(x.v[m * c.K + k])));
        xs[j] = std::max(amax, 1e-10f) / 448.0f;
        for (int64_t k = k0; k < k1; ++k) xq[k] = quantize(static_cast<float>(x.v[m * c.K + k]) / xs[j]);
      }
      for (int64_t n = 0; n < c.N; ++n) {
        float acc = 0.0f;
        double d = 0.0;
        for (int64_t j = 0; j < nbk; ++j) {
          const int64_t k0 = j * 128, kl = std::min<int64_t>(128, c.K - k0);
          const float p = static_cast<float>(exact_fp8_dot(xq.data() + k0, wq.v.data() + n * c.K + k0, kl));
          acc += (p * xs[j]) * static_cast<float>(ws.v[(n / 128) * nbk + j]);
          for (int64_t k = k0; k < k0 + kl; ++k) d += x.v[m * c.K + k] * wq.v[n * c.K + k] * ws.v[(n / 128) * nbk + j];
        }
        exact[m * c.N + n] = acc;
        deq[m * c.N + n] = d;
      }
    }
    HostTensor out32 = f32_tensor({c.M, c.N}), out16 = bf16_tensor({c.M, c.N});
    out32.poison();
    out16.poison();
    const LinearWeight w = LinearWeight::fp8_block(wq.view(), ws.view());
    linear(*be, {x.view(), w, out32.view()});
    linear(*be, {x.view(), w, out16.view()});
    for (int64_t i = 0; i < c.M * c.N; ++i) {
      ASSERT_EQ(out32.get(i), exact[i]) << "f32 output differs from the exact FP8 GEMM at " << i;
      ASSERT_EQ(out16.get(i), bf16_round(exact[i])) << "bf16 output at " << i;
    }
    // Against the dequantised weights and unquantised activations: e4m3 keeps
    // 3 mantissa bits, so each activation moves by at most 2^-4 of itself
    // (plus a subnormal floor of amax/448 * 2^-10).
    std::vector<double> wdeq(static_cast<size_t>(c.N * c.K));
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t k = 0; k < c.K; ++k) wdeq[n * c.K + k] = wq.v[n * c.K + k] * ws.v[(n / 128) * nbk + k / 128];
    const auto mag = abs_dot(x, wdeq, c.M, c.K, c.N);
    double xmax = 0.0;
    for (double v : x.v) xmax = std::max(xmax, std::fabs(v));
    for (int64_t i = 0; i < c.M * c.N; ++i) {
      double wsum = 0.0;
      for (int64_t k = 0; k < c.K; ++k) wsum += std::fabs(wdeq[(i % c.N) * c.K + k]);
      ASSERT_NEAR(out32.get(i), deq[i], std::ldexp(mag[i], -4) + wsum * xmax / 448.0 * std::ldexp(1.0, -10) + 1e-6);
    }
  }
}

TEST(Linear, Fp8TensorIsAnExactFp8Gemm) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  for (LinearCase c : {LinearCase{1, 64, 40}, {6, 333, 77}}) {
    HostTensor x = bf16_tensor({c.M, c.K}), wq(DType::kF8E4M3, {c.N, c.K}), ws = f32_tensor({1}),
               is = f32_tensor({1});
    x.fill_normal(rng);
    x.set(0, 500.0);  // beyond 448 * input_scale: saturates
    wq.fill_normal(rng, 60.0);
    ws.set(0, 3e-4);
    is.set(0, 0.02);
    const float in_scale = static_cast<float>(is.v[0]);
    const float out_scale = in_scale * static_cast<float>(ws.v[0]);
    std::vector<double> xq(static_cast<size_t>(c.M * c.K)), exact(static_cast<size_t>(c.M * c.N));
    for (int64_t i = 0; i < c.M * c.K; ++i) xq[i] = quantize(static_cast<float>(x.v[i]) / in_scale);
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n)
        exact[m * c.N + n] =
            static_cast<float>(exact_fp8_dot(xq.data() + m * c.K, wq.v.data() + n * c.K, c.K)) * out_scale;
    HostTensor out32 = f32_tensor({c.M, c.N}), out16 = bf16_tensor({c.M, c.N});
    out32.poison();
    out16.poison();
    const LinearWeight w = LinearWeight::fp8_tensor(wq.view(), ws.view(), is.view());
    linear(*be, {x.view(), w, out32.view()});
    linear(*be, {x.view(), w, out16.view()});
    for (int64_t i = 0; i < c.M * c.N; ++i) {
      ASSERT_EQ(out32.get(i), exact[i]) << i;
      ASSERT_EQ(out16.get(i), bf16_round(exact[i])) << i;
    }
  }
}

}  // namespace
}  // namespace hyllm::test
