// MoE routing and experts: softmax/top-k/renormalise against a double
// reference; both expert layouts give identical bits and match a double
// reference built from the same linear semantics; the shared expert is gated
// by sigmoid.
#include <algorithm>
#include <numeric>

#include "ops_test_util.h"

namespace hyllm::test {
namespace {

TEST(MoeRoute, SoftmaxTopkRenormalised) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t T = 9, E = 16, k = 4;
  HostTensor logits = f32_tensor({T, E});
  logits.fill_normal(rng, 2.0);
  HostTensor ids(DType::kI32, {T, k}), w = f32_tensor({T, k});
  ids.poison();
  w.poison();
  moe_route(*be, {logits.view(), ids.view(), w.view(), k});
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> p(E);
    double mx = *std::max_element(logits.v.begin() + t * E, logits.v.begin() + (t + 1) * E), sum = 0.0;
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(logits.v[t * E + e] - mx));
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double top = 0.0;
    for (int64_t i = 0; i < k; ++i) top += p[order[i]];
    for (int64_t i = 0; i < k; ++i) {
      ASSERT_EQ(ids.get(t * k + i), order[i]) << "token " << t;
      ASSERT_NEAR(w.get(t * k + i), p[order[i]] / top, 1e-6);
    }
  }
  // Ties go to the lower expert id.
  HostTensor tied = bf16_tensor({1, 4}), tid(DType::kI32, {1, 2}), tw = f32_tensor({1, 2});
  for (int64_t e = 0; e < 4; ++e) tied.set(e, e == 0 ? 0.0 : 1.0);
  moe_route(*be, {tied.view(), tid.view(), tw.view(), 2});
  EXPECT_EQ(tid.get(0), 1);
  EXPECT_EQ(tid.get(1), 2);
  EXPECT_FLOAT_EQ(tw.get(0), 0.5f);
}

TEST(MoeExperts, LayoutsAgreeAndMatchReference) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t T = 7, H = 48, I = 20, E = 5, k = 2;
  HostTensor x = bf16_tensor({T, H}), gate_up = bf16_tensor({E, 2 * I, H}), down = bf16_tensor({E, H, I});
  x.fill_normal(rng);
  gate_up.fill_normal(rng, 0.3);
  down.fill_normal(rng, 0.3);
  HostTensor ids(DType::kI32, {T, k}), tw = f32_tensor({T, k});
  for (int64_t t = 0; t < T; ++t) {
    const int64_t e0 = rng.integer(0, E - 1), e1 = (e0 + rng.integer(1, E - 1)) % E;
    ids.set(t * k, static_cast<double>(e0));
    ids.set(t * k + 1, static_cast<double>(e1));
    const double w0 = rng.uniform(0.2, 0.8);
    tw.set(t * k, w0);
    tw.set(t * k + 1, 1.0 - w0);
  }
  HostTensor shared = bf16_tensor({T, H}), sgate = bf16_tensor({T, 1});
  shared.fill_normal(rng);
  sgate.fill_normal(rng, 2.0);

  // Per-expert copies of the same weights.
  std::vector<HostTensor> g(E), u(E), d(E);
  MoeExpertWeights per;
  for (int64_t e = 0; e < E; ++e) {
    g[e] = bf16_tensor({I, H});
    u[e] = bf16_tensor({I, H});
    d[e] = bf16_tensor({H, I});
    for (int64_t i = 0; i < I * H; ++i) {
      g[e].set(i, gate_up.v[e * 2 * I * H + i]);
      u[e].set(i, gate_up.v[e * 2 * I * H + I * H + i]);
      d[e].set(i, down.v[e * H * I + i]);
    }
  }
  for (int64_t e = 0; e < E; ++e) {
    per.expert_gate.push_back(LinearWeight::bf16(g[e].view()));
    per.expert_up.push_back(LinearWeight::bf16(u[e].view()));
    per.expert_down.push_back(LinearWeight::bf16(d[e].view()));
  }
  MoeExpertWeights fused;
  fused.gate_up = LinearWeight::bf16(gate_up.view());
  fused.down = LinearWeight::bf16(down.view());

  HostTensor out_fused = bf16_tensor({T, H}), out_per = bf16_tensor({T, H});
  out_fused.poison();
  out_per.poison();
  moe_experts(*be, {x.view(), ids.view(), tw.view(), fused, shared.view(), sgate.view(), out_fused.view()});
  moe_experts(*be, {x.view(), ids.view(), tw.view(), per, shared.view(), sgate.view(), out_per.view()});
  ASSERT_EQ(out_fused.values(), out_per.values());

  // Reference: each projection rounded to bf16 as the linear op does, the
  // weighted sum in double.
  std::vector<double> want(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) want[t * H + h] = sigmoid(sgate.v[t]) * shared.v[t * H + h];
    for (int64_t i = 0; i < k; ++i) {
      const int64_t e = static_cast<int64_t>(ids.v[t * k + i]);
      std::vector<double> hid(I);
      for (int64_t j = 0; j < I; ++j) {
        double gs = 0.0, us = 0.0;
        for (int64_t c = 0; c < H; ++c) {
          gs += x.v[t * H + c] * gate_up.v[(e * 2 * I + j) * H + c];
          us += x.v[t * H + c] * gate_up.v[(e * 2 * I + I + j) * H + c];
        }
        hid[j] = bf16_round(silu(bf16_round(gs)) * bf16_round(us));
      }
      for (int64_t h = 0; h < H; ++h) {
        double o = 0.0;
        for (int64_t j = 0; j < I; ++j) o += hid[j] * down.v[(e * H + h) * I + j];
        want[t * H + h] += tw.v[t * k + i] * bf16_round(o);
      }
    }
  }
  // Intermediate roundings may land one step apart (fp32 vs double sums);
  // the output is checked to 4e-3 of its largest magnitude (one bf16 step).
  EXPECT_LT(normalized_error(out_fused.values(), want), 4e-3);

  // Without the shared expert the shared term disappears.
  HostTensor out_noshared = bf16_tensor({T, H});
  moe_experts(*be, {x.view(), ids.view(), tw.view(), fused, {}, {}, out_noshared.view()});
  for (int64_t i = 0; i < T * H; ++i) want[i] -= sigmoid(sgate.v[i / H]) * shared.v[i];
  EXPECT_LT(normalized_error(out_noshared.values(), want), 4e-3);
}

TEST(MoeExperts, Fp8BlockFusedEqualsPerExpertSlices) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t T = 5, H = 256, I = 128, E = 3, k = 2;
  HostTensor x = bf16_tensor({T, H});
  x.fill_normal(rng);
  HostTensor gu(DType::kF8E4M3, {E, 2 * I, H}), dn(DType::kF8E4M3, {E, H, I});
  gu.fill_normal(rng, 50.0);
  dn.fill_normal(rng, 50.0);
  HostTensor gus = f32_tensor({E, 2, 2}), dns = f32_tensor({E, 2, 1});
  gus.fill_uniform(rng, 1e-4, 1e-3);
  dns.fill_uniform(rng, 1e-4, 1e-3);
  HostTensor ids(DType::kI32, {T, k}), tw = f32_tensor({T, k});
  for (int64_t t = 0; t < T; ++t) {
    ids.set(t * k, static_cast<double>(t % E));
    ids.set(t * k + 1, static_cast<double>((t + 1) % E));
    tw.set(t * k, 0.7);
    tw.set(t * k + 1, 0.3);
  }
  MoeExpertWeights fused;
  fused.gate_up = LinearWeight::fp8_block(gu.view(), gus.view());
  fused.down = LinearWeight::fp8_block(dn.view(), dns.view());
  // Per-expert views into the same memory: gate rows [0, I), up rows [I, 2I).
  MoeExpertWeights per;
  auto sub = [](const HostTensor& t, int64_t offset_elems, Shape s) {
    const size_t es = dtype_size(t.dtype());
    return TensorView(static_cast<char*>(t.view().data()) + offset_elems * es, t.dtype(), s);
  };
  for (int64_t e = 0; e < E; ++e) {
    per.expert_gate.push_back(LinearWeight::fp8_block(sub(gu, e * 2 * I * H, {I, H}), sub(gus, e * 4, {1, 2})));
    per.expert_up.push_back(
        LinearWeight::fp8_block(sub(gu, e * 2 * I * H + I * H, {I, H}), sub(gus, e * 4 + 2, {1, 2})));
    per.expert_down.push_back(LinearWeight::fp8_block(sub(dn, e * H * I, {H, I}), sub(dns, e * 2, {2, 1})));
  }
  HostTensor a = bf16_tensor({T, H}), b = bf16_tensor({T, H});
  a.poison();
  b.poison();
  moe_experts(*be, {x.view(), ids.view(), tw.view(), fused, {}, {}, a.view()});
  moe_experts(*be, {x.view(), ids.view(), tw.view(), per, {}, {}, b.view()});
  const auto av = a.values();
  for (double v : av) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(av, b.values());
}

TEST(EmptyBatch, OpsWithNoTokensAreNoOps) {
  auto be = make_cpu_backend();
  HostTensor x = bf16_tensor({0, 16}), w = bf16_tensor({8, 16}), out = bf16_tensor({0, 8});
  linear(*be, {x.view(), LinearWeight::bf16(w.view()), out.view()});
  HostTensor nw = bf16_tensor({16}), nout = bf16_tensor({0, 16});
  rms_norm(*be, {x.view(), nw.view(), nout.view(), {}, {}, 1e-6f, true});
  HostTensor q = bf16_tensor({0, 2 * 8}), kc = bf16_tensor({2, 4, 1, 8}), vc = bf16_tensor({2, 4, 1, 8});
  HostTensor bt(DType::kI32, {1, 2}), qsl = i32_tensor({0, 0}), lens = i32_tensor({0}), o = bf16_tensor({0, 16});
  paged_attention(*be, {q.view(), {kc.view(), vc.view()}, bt.view(), qsl.view(), lens.view(), {}, o.view(), 2, 1,
                        8, 0.0f, 0, 0});
}

}  // namespace
}  // namespace hyllm::test
