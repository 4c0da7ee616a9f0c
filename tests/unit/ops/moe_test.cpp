// MoE routing and the whole MoE block: softmax/top-k/renormalise against a
// double reference; the block equals its definition composed from the other
// ops in every weight format and matches a double reference; the shared
// expert is gated by sigmoid; bad weights are rejected.
#include <algorithm>
#include <numeric>

#include "moe_test_util.h"

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

// Expert e of a stacked weight as a 2-D linear weight.
LinearWeight expert(const LinearWeight& s, int64_t e) {
  auto sub = [&](const TensorView& t) {
    if (t.empty()) return t;
    const Shape rest = t.rank() == 1 ? Shape{1} : Shape::from(t.shape().begin() + 1, t.shape().end());
    return t.slice_rows(e, e + 1).reshape(rest);
  };
  return {s.format, sub(s.weight), sub(s.weight_scale), sub(s.input_scale)};
}

// down(swiglu(gate_up(x))) of one row through the linear and swiglu ops.
std::vector<float> mlp_row(Backend& be, const LinearWeight& gu, const LinearWeight& dn, const TensorView& x_row) {
  const int64_t I = dn.in_features(), H = dn.out_features();
  HostTensor g = bf16_tensor({1, 2 * I}), h = bf16_tensor({1, I}), y = bf16_tensor({1, H});
  linear(be, {x_row, gu, g.view()});
  swiglu(be, {g.view(), h.view()});
  linear(be, {h.view(), dn, y.view()});
  std::vector<float> out(static_cast<size_t>(H));
  for (int64_t i = 0; i < H; ++i) out[i] = static_cast<float>(y.get(i));
  return out;
}

// The moe contract composed from the other ops, token by token: router
// linear, moe_route, each chosen expert's MLP in ascending expert id, the
// gated shared expert, fp32 sums as documented.
std::vector<double> composed(Backend& be, const MoeArgs& a, std::vector<int32_t>& ids_out) {
  const int64_t T = a.x.dim(0), H = a.x.dim(1), E = a.router.dim(0), k = a.top_k;
  HostTensor logits = bf16_tensor({T, E}), ids(DType::kI32, {T, k}), tw = f32_tensor({T, k});
  linear(be, {a.x, LinearWeight::bf16(a.router), logits.view()});
  moe_route(be, {logits.view(), ids.view(), tw.view(), k});
  HostTensor gl = bf16_tensor({T, 1});
  if (!a.shared.gate.empty()) linear(be, {a.x, LinearWeight::bf16(a.shared.gate), gl.view()});
  std::vector<double> out(static_cast<size_t>(T * H));
  ids_out.assign(static_cast<size_t>(T * k), 0);
  for (int64_t t = 0; t < T; ++t) {
    const TensorView row = a.x.slice_rows(t, t + 1);
    std::vector<int64_t> order(static_cast<size_t>(k));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return ids.get(t * k + p) < ids.get(t * k + q); });
    std::vector<float> acc(static_cast<size_t>(H), 0.0f);
    for (int64_t i : order) {
      const int64_t e = static_cast<int64_t>(ids.get(t * k + i));
      ids_out[t * k + i] = static_cast<int32_t>(e);
      const auto y = mlp_row(be, expert(a.experts.gate_up, e), expert(a.experts.down, e), row);
      const float w = static_cast<float>(tw.get(t * k + i));
      for (int64_t h = 0; h < H; ++h) acc[h] += w * y[h];
    }
    if (!a.shared.empty()) {
      const auto y = mlp_row(be, a.shared.gate_up, a.shared.down, row);
      // sigmoid in fp32, as the op computes it
      const float g = a.shared.gate.empty() ? 1.0f : 1.0f / (1.0f + std::exp(-static_cast<float>(gl.get(t))));
      for (int64_t h = 0; h < H; ++h) acc[h] += g * y[h];
    }
    for (int64_t h = 0; h < H; ++h) out[t * H + h] = bf16_round(acc[h]);
  }
  return out;
}

class MoeFormats : public ::testing::TestWithParam<WeightFormat> {};

// The fused op equals its definition composed from linear, moe_route and
// swiglu, bit for bit, in every weight format (CPU linears are
// batch-invariant, so the per-expert row batches do not matter).
TEST_P(MoeFormats, EqualsComposedOps) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  MoeShape s;
  s.format = GetParam();
  s.E = 6;
  s.k = 3;
  s.H = 256;
  s.I = 128;
  s.Is = s.format == WeightFormat::kBf16 ? 96 : 256;
  MoeTensors m(s, rng);
  const int64_t T = 9;
  HostTensor x = m.input(rng, T), out = bf16_tensor({T, s.H}), ids(DType::kI32, {T, s.k}), tw = f32_tensor({T, s.k});
  out.poison();
  MoeArgs a = m.args([](const HostTensor& h) { return h.view(); }, x.view(), out.view());
  a.topk_ids = ids.view();
  a.topk_weights = tw.view();
  moe(*be, a);
  std::vector<int32_t> want_ids;
  const auto want = composed(*be, a, want_ids);
  EXPECT_EQ(out.values(), want);
  for (int64_t i = 0; i < T * s.k; ++i) EXPECT_EQ(ids.get(i), want_ids[i]) << i;
  for (double v : want) ASSERT_TRUE(std::isfinite(v));
  if (s.format != WeightFormat::kFp8Block) return;
  // Block-FP8 experts reading the input quantised once by its producer give
  // the same bits as quantising it inside the op, which the counters tell apart.
  HostTensor q(DType::kF8E4M3, {T, s.H}), qs = f32_tensor({(s.H + 127) / 128, T}), out2 = bf16_tensor({T, s.H});
  Fp8Activation xq{ActQuantMode::kGroup128, q.view(), qs.view()};
  quantize_fp8(*be, {x.view(), xq});
  be->counters() = {};
  a.xq = xq;
  a.out = out2.view();
  moe(*be, a);
  EXPECT_EQ(out2.values(), want);
  EXPECT_EQ(be->counters().linear_self_quantizations, 0);
  EXPECT_EQ(be->counters().fp8_quantizations, 1);  // the experts' SwiGLU outputs
  a.xq = {};
  moe(*be, a);
  EXPECT_EQ(be->counters().linear_self_quantizations, 1);
}

INSTANTIATE_TEST_SUITE_P(Formats, MoeFormats,
                         ::testing::Values(WeightFormat::kBf16, WeightFormat::kFp8Block, WeightFormat::kFp8Tensor),
                         [](const ::testing::TestParamInfo<WeightFormat>& i) {
                           return std::string(i.param == WeightFormat::kBf16       ? "bf16"
                                              : i.param == WeightFormat::kFp8Block ? "fp8_block"
                                                                                   : "fp8_tensor");
                         });

// Against a double reference written from QWEN35.md 3.5 with the roundings
// of ops.h: logits, gate/up, hidden and each expert output in bf16.
TEST(Moe, MatchesDoubleReference) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  MoeShape s;
  s.E = 5;
  s.k = 2;
  s.H = 48;
  s.I = 24;
  s.Is = 40;
  MoeTensors m(s, rng);
  const int64_t T = 7, H = s.H;
  HostTensor x = m.input(rng, T), out = bf16_tensor({T, H});
  out.poison();
  moe(*be, m.args([](const HostTensor& h) { return h.view(); }, x.view(), out.view()));
  auto mlp = [&](const HostTensor& gu, const HostTensor& dn, int64_t off_gu, int64_t off_dn, int64_t I, int64_t t) {
    std::vector<double> hid(I), y(H);
    for (int64_t j = 0; j < I; ++j) {
      double g = 0.0, u = 0.0;
      for (int64_t c = 0; c < H; ++c) {
        g += x.v[t * H + c] * gu.get(off_gu + j * H + c);
        u += x.v[t * H + c] * gu.get(off_gu + (I + j) * H + c);
      }
      hid[j] = bf16_round(silu(bf16_round(g)) * bf16_round(u));
    }
    for (int64_t h = 0; h < H; ++h) {
      double o = 0.0;
      for (int64_t j = 0; j < I; ++j) o += hid[j] * dn.get(off_dn + h * I + j);
      y[h] = bf16_round(o);
    }
    return y;
  };
  std::vector<double> want(static_cast<size_t>(T * H), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> logit(s.E + 1);
    for (int64_t e = 0; e <= s.E; ++e) {
      double d = 0.0;
      for (int64_t c = 0; c < H; ++c) d += x.v[t * H + c] * m.router.v[e * H + c];
      logit[e] = bf16_round(d);
    }
    std::vector<double> p(s.E);
    double mx = *std::max_element(logit.begin(), logit.begin() + s.E), sum = 0.0;
    for (int64_t e = 0; e < s.E; ++e) sum += (p[e] = std::exp(logit[e] - mx));
    std::vector<int64_t> order(s.E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::sort(order.begin(), order.begin() + s.k);  // the chosen experts in ascending id
    double top = 0.0;
    for (int64_t i = 0; i < s.k; ++i) top += p[order[i]];
    for (int64_t i = 0; i < s.k; ++i) {
      const int64_t e = order[i];
      const auto y = mlp(m.gu, m.dn, e * 2 * s.I * H, e * H * s.I, s.I, t);
      for (int64_t h = 0; h < H; ++h) want[t * H + h] += p[e] / top * y[h];
    }
    const auto ys = mlp(m.sgu, m.sdn, 0, 0, s.Is, t);
    for (int64_t h = 0; h < H; ++h) want[t * H + h] += sigmoid(logit[s.E]) * ys[h];
  }
  // Intermediate roundings may land one step apart (fp32 vs double sums).
  EXPECT_LT(normalized_error(out.values(), want), 4e-3);
}

// Without a gate the shared expert is added as is; without a shared expert
// only the routed experts remain.
TEST(Moe, SharedExpertGateAndAbsence) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  MoeShape s;
  s.gated = false;
  MoeTensors m(s, rng);
  const int64_t T = 5;
  HostTensor x = m.input(rng, T), ungated = bf16_tensor({T, s.H}), none = bf16_tensor({T, s.H});
  auto host = [](const HostTensor& h) { return h.view(); };
  moe(*be, m.args(host, x.view(), ungated.view()));
  MoeArgs a = m.args(host, x.view(), none.view());
  a.shared = {};
  moe(*be, a);
  std::vector<int32_t> ids;
  EXPECT_EQ(ungated.values(), composed(*be, m.args(host, x.view(), ungated.view()), ids));
  EXPECT_EQ(none.values(), composed(*be, a, ids));
  EXPECT_NE(ungated.values(), none.values());
}

TEST(Moe, RejectsBadWeights) {
  auto be = make_cpu_backend();
  Rng rng(1);
  MoeShape s;
  s.format = WeightFormat::kFp8Block;
  s.I = 96;  // block scales would mix gate and up rows
  MoeTensors m(s, rng);
  HostTensor x = m.input(rng, 2), out = bf16_tensor({2, s.H});
  auto host = [](const HostTensor& h) { return h.view(); };
  EXPECT_THROW(moe(*be, m.args(host, x.view(), out.view())), Error);
  MoeShape b;
  MoeTensors mb(b, rng);
  MoeArgs a = mb.args(host, x.view(), out.view());
  a.top_k = b.E + 1;
  EXPECT_THROW(moe(*be, a), Error);
  a = mb.args(host, x.view(), out.view());
  std::swap(a.experts.gate_up, a.experts.down);
  EXPECT_THROW(moe(*be, a), Error);
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
