// Gated DeltaNet: the causal conv with state and the gated delta rule, against
// double references; state carried across calls and batching must agree with
// one call per sequence; the chunked form must agree with the recurrent one.
#include <algorithm>

#include "ops_test_util.h"

namespace hyllm::test {
namespace {

// ---------------------------------------------------------------- conv

struct ConvSetup {
  int64_t C, K;
  HostTensor w;
  ConvSetup(Rng& rng, int64_t c, int64_t k) : C(c), K(k), w(bf16_tensor({c, 1, k})) { w.fill_normal(rng, 0.5); }
};

// Runs gdn_conv over the given sequences; x holds all tokens (rows) in a
// wider tensor at column offset 3.
std::vector<double> run_conv(Backend& be, const ConvSetup& cs, const HostTensor& x, HostTensor& state,
                             const std::vector<int64_t>& qsl, const std::vector<int64_t>& slots,
                             const std::vector<int64_t>& init) {
  const int64_t T = qsl.back();
  HostTensor q = i32_tensor(qsl), s = i32_tensor(slots), in = i32_tensor(init), out = bf16_tensor({T, cs.C});
  out.poison();
  gdn_conv(be, {ColSlice(x.view(), 3, cs.C), cs.w.view(), state.view(), q.view(), s.view(), in.view(), out.view()});
  return out.values();
}

TEST(GdnConv, MatchesReferenceWithStateAndSequenceStarts) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  ConvSetup cs(rng, 70, 4);
  const int64_t H = cs.K - 1;
  // Sequences: fresh 7 tokens; continuing with 2 (< K-1) tokens; padding with
  // none; fresh single token.
  const std::vector<int64_t> qsl{0, 7, 9, 9, 10}, slots{2, 0, 1, 3}, init{0, 1, 1, 0};
  HostTensor x = bf16_tensor({10, cs.C + 5}), state = bf16_tensor({4, H, cs.C});
  x.fill_normal(rng, 2.0);
  state.fill_normal(rng, 2.0);
  const std::vector<double> state0 = state.v;
  const auto got = run_conv(*be, cs, x, state, qsl, slots, init);
  std::vector<double> want(static_cast<size_t>(10 * cs.C)), want_state = state0;
  for (size_t s = 0; s + 1 < qsl.size(); ++s) {
    const int64_t n = qsl[s + 1] - qsl[s];
    if (n == 0) continue;
    for (int64_t c = 0; c < cs.C; ++c) {
      std::vector<double> ext;
      for (int64_t r = 0; r < H; ++r) ext.push_back(init[s] ? state0[(slots[s] * H + r) * cs.C + c] : 0.0);
      for (int64_t t = 0; t < n; ++t) ext.push_back(x.v[(qsl[s] + t) * (cs.C + 5) + 3 + c]);
      for (int64_t t = 0; t < n; ++t) {
        double acc = 0.0;
        for (int64_t j = 0; j < cs.K; ++j) acc += cs.w.v[c * cs.K + j] * ext[t + j];
        want[(qsl[s] + t) * cs.C + c] = silu(acc);
      }
      for (int64_t r = 0; r < H; ++r) want_state[(slots[s] * H + r) * cs.C + c] = ext[n + r];
    }
  }
  EXPECT_EQ(bf16_mismatches(got, want, 1.01, 1e-6), 0);
  EXPECT_EQ(state.values(), want_state) << "conv state must hold the last K-1 raw inputs";
}

TEST(GdnConv, StateCarriedAcrossCallsEqualsOneCall) {
  auto be = make_cpu_backend();
  Rng rng(fresh_seed());
  ConvSetup cs(rng, 33, 4);
  const int64_t T = 11;
  HostTensor x = bf16_tensor({T, cs.C + 5});
  x.fill_normal(rng);
  HostTensor st1 = bf16_tensor({1, 3, cs.C}), st2 = bf16_tensor({1, 3, cs.C});
  st1.poison();  // a starting sequence never reads its slot
  st2.poison();
  const auto whole = run_conv(*be, cs, x, st1, {0, T}, {0}, {0});
  std::vector<double> pieces;
  int64_t t0 = 0;
  for (int64_t n : {5, 1, 2, 3}) {
    HostTensor xp = bf16_tensor({n, cs.C + 5});
    for (int64_t i = 0; i < xp.numel(); ++i) xp.set(i, x.v[t0 * (cs.C + 5) + i]);
    const auto part = run_conv(*be, cs, xp, st2, {0, n}, {0}, {t0 == 0 ? 0 : 1});
    pieces.insert(pieces.end(), part.begin(), part.end());
    t0 += n;
  }
  EXPECT_EQ(pieces, whole);
  EXPECT_EQ(st2.values(), st1.values());
}

// ---------------------------------------------------------------- delta rule

struct DeltaSetup {
  int64_t Hk, Hv, Dk, Dv;
  HostTensor alog, dt;
  DeltaSetup(Rng& rng, int64_t hk, int64_t hv, int64_t dk, int64_t dv)
      : Hk(hk), Hv(hv), Dk(dk), Dv(dv), alog(f32_tensor({hv})), dt(bf16_tensor({hv})) {
    alog.fill_uniform(rng, -2.0, 0.5);
    dt.fill_normal(rng, 0.5);
  }
  int64_t width() const { return 2 * Hk * Dk + Hv * Dv; }
};

struct DeltaTokens {
  HostTensor qkv, ab;  // ab: [T, Hv (b) | Hv (a)]
  DeltaTokens(Rng& rng, const DeltaSetup& d, int64_t T)
      : qkv(bf16_tensor({T, d.width()})), ab(bf16_tensor({T, 2 * d.Hv})) {
    qkv.fill_normal(rng);
    ab.fill_normal(rng);
    if (T > 3) ab.set(2 * d.Hv + d.Hv, 25.0);  // softplus above its threshold
  }
  DeltaTokens rows(const DeltaSetup& d, int64_t t0, int64_t n) const {
    Rng unused(0);
    DeltaTokens r(unused, d, n);
    for (int64_t i = 0; i < r.qkv.numel(); ++i) r.qkv.set(i, qkv.v[t0 * d.width() + i]);
    for (int64_t i = 0; i < r.ab.numel(); ++i) r.ab.set(i, ab.v[t0 * 2 * d.Hv + i]);
    return r;
  }
};

// Double reference: the recurrence of ops.h for one sequence; state is
// [Hv][Dv][Dk] and is updated.
std::vector<double> delta_ref(const DeltaSetup& d, const DeltaTokens& tok, int64_t t0, int64_t n,
                              std::vector<double>& S) {
  std::vector<double> out(static_cast<size_t>(n * d.Hv * d.Dv));
  const int64_t W = d.width();
  for (int64_t t = 0; t < n; ++t) {
    const double* row = tok.qkv.v.data() + (t0 + t) * W;
    for (int64_t h = 0; h < d.Hv; ++h) {
      const int64_t kh = h / (d.Hv / d.Hk);
      std::vector<double> q(row + kh * d.Dk, row + (kh + 1) * d.Dk);
      std::vector<double> k(row + d.Hk * d.Dk + kh * d.Dk, row + d.Hk * d.Dk + (kh + 1) * d.Dk);
      const double* v = row + 2 * d.Hk * d.Dk + h * d.Dv;
      double qs = 0.0, ks = 0.0;
      for (int64_t i = 0; i < d.Dk; ++i) {
        qs += q[i] * q[i];
        ks += k[i] * k[i];
      }
      for (int64_t i = 0; i < d.Dk; ++i) {
        q[i] /= std::sqrt(qs + 1e-6) * std::sqrt(static_cast<double>(d.Dk));
        k[i] /= std::sqrt(ks + 1e-6);
      }
      const double b = tok.ab.v[(t0 + t) * 2 * d.Hv + h], a = tok.ab.v[(t0 + t) * 2 * d.Hv + d.Hv + h];
      const double x = a + d.dt.v[h];
      const double g = -std::exp(d.alog.v[h]) * (x > 20.0 ? x : std::log1p(std::exp(x)));
      const double beta = sigmoid(b);
      for (int64_t j = 0; j < d.Dv; ++j) {
        double* sr = S.data() + (h * d.Dv + j) * d.Dk;
        double pred = 0.0;
        for (int64_t i = 0; i < d.Dk; ++i) pred += (sr[i] *= std::exp(g)) * k[i];
        const double u = beta * (v[j] - pred);
        double o = 0.0;
        for (int64_t i = 0; i < d.Dk; ++i) o += (sr[i] += u * k[i]) * q[i];
        out[(t * d.Hv + h) * d.Dv + j] = o;
      }
    }
  }
  return out;
}

// Runs gated_delta_rule over sequences (qsl) of `tok` with slots and init flags.
std::vector<double> run_delta(Backend& be, const DeltaSetup& d, const DeltaTokens& tok, HostTensor& state,
                              const std::vector<int64_t>& qsl, const std::vector<int64_t>& slots,
                              const std::vector<int64_t>& init, DeltaRuleAlgorithm algo) {
  const int64_t T = qsl.back();
  HostTensor q = i32_tensor(qsl), s = i32_tensor(slots), in = i32_tensor(init), out = bf16_tensor({T, d.Hv * d.Dv});
  out.poison();
  GatedDeltaRuleArgs a{tok.qkv.view(), ColSlice(tok.ab.view(), d.Hv, d.Hv), ColSlice(tok.ab.view(), 0, d.Hv),
                       d.alog.view(), d.dt.view(), state.view(), q.view(), s.view(), in.view(), out.view(),
                       d.Hk, d.Hv, d.Dk, d.Dv, algo, 0};
  gated_delta_rule(be, a);
  return out.values();
}

// Outputs are bf16 (2^-8 relative steps); allow two ulps plus 1e-3 of the
// largest output for fp32-vs-double drift over hundreds of tokens.
void expect_outputs_close(const std::vector<double>& got, const std::vector<double>& want) {
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  EXPECT_EQ(bf16_mismatches(got, want, 2.01, 1e-3 * scale), 0);
}

class DeltaRule : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(DeltaRule, BothAlgorithmsMatchTheDoubleRecurrence) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  auto [hk, hv, dk, dv] = GetParam();
  DeltaSetup d(rng, hk, hv, dk, dv);
  const int64_t T = 203;  // three full chunks and a partial one
  DeltaTokens tok(rng, d, T);
  HostTensor init_state = f32_tensor({2, hv, dv, dk});
  init_state.fill_normal(rng, 0.3);
  std::vector<double> ref_state(init_state.v.begin() + hv * dv * dk, init_state.v.end());
  const auto want = delta_ref(d, tok, 0, T, ref_state);
  for (auto algo : {DeltaRuleAlgorithm::kRecurrent, DeltaRuleAlgorithm::kChunked}) {
    SCOPED_TRACE(algo == DeltaRuleAlgorithm::kChunked ? "chunked" : "recurrent");
    HostTensor state = f32_tensor({2, hv, dv, dk});
    for (int64_t i = 0; i < state.numel(); ++i) state.set(i, init_state.v[i]);
    const auto got = run_delta(*be, d, tok, state, {0, T}, {1}, {1}, algo);
    expect_outputs_close(got, want);
    const auto vals = state.values();
    EXPECT_LT(normalized_error({vals.begin() + hv * dv * dk, vals.end()}, ref_state), 1e-4);
    // Slot 0 was not this sequence's: untouched.
    for (int64_t i = 0; i < hv * dv * dk; ++i) ASSERT_EQ(vals[i], init_state.v[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(HeadRatios, DeltaRule,
                         ::testing::Values(std::tuple{1, 1, 16, 16}, std::tuple{2, 4, 16, 24},
                                           std::tuple{1, 3, 32, 8}));

TEST(DeltaRuleState, ChunkSplitAcrossCallsAndBatchingAgree) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  DeltaSetup d(rng, 2, 4, 16, 24);
  const int64_t T = 230;
  DeltaTokens tok(rng, d, T);
  const int64_t n_state = d.Hv * d.Dv * d.Dk;
  // One call over the whole sequence from a zero state (slot content is junk).
  HostTensor whole_state = f32_tensor({1, d.Hv, d.Dv, d.Dk});
  whole_state.poison();
  const auto whole = run_delta(*be, d, tok, whole_state, {0, T}, {0}, {0}, DeltaRuleAlgorithm::kChunked);
  std::vector<double> ref_state(static_cast<size_t>(n_state), 0.0);
  expect_outputs_close(whole, delta_ref(d, tok, 0, T, ref_state));

  // The same tokens in pieces that split chunks, decode steps included.
  HostTensor st = f32_tensor({1, d.Hv, d.Dv, d.Dk});
  st.poison();
  std::vector<double> pieces;
  int64_t t0 = 0;
  for (int64_t n : {70, 1, 100, 1, 1, 57}) {
    const auto algo = n == 1 ? DeltaRuleAlgorithm::kRecurrent : DeltaRuleAlgorithm::kChunked;
    const auto part = run_delta(*be, d, tok.rows(d, t0, n), st, {0, n}, {0}, {t0 == 0 ? 0 : 1}, algo);
    pieces.insert(pieces.end(), part.begin(), part.end());
    t0 += n;
  }
  ASSERT_EQ(t0, T);
  // Batch invariance (cpu_kernels.h): however the sequence is split into
  // calls and whichever algorithm is asked for, every token and the final
  // state are bit-identical.
  EXPECT_EQ(pieces, whole);
  EXPECT_EQ(st.values(), whole_state.values());

  // A batch of three sequences in one call equals each alone, bit for bit:
  // a continuing one (slot 2), a fresh one (slot 0), and a decode (slot 1).
  HostTensor batch_state = f32_tensor({3, d.Hv, d.Dv, d.Dk});
  batch_state.fill_normal(rng, 0.2);
  const std::vector<double> before = batch_state.values();
  const std::vector<int64_t> qsl{0, 90, 160, 161}, slots{2, 0, 1}, init{1, 0, 1};
  for (auto algo : {DeltaRuleAlgorithm::kChunked, DeltaRuleAlgorithm::kRecurrent}) {
    HostTensor bs = f32_tensor({3, d.Hv, d.Dv, d.Dk});
    for (int64_t i = 0; i < bs.numel(); ++i) bs.set(i, before[i]);
    const auto batched = run_delta(*be, d, tok.rows(d, 0, 161), bs, qsl, slots, init, algo);
    const auto bvals = bs.values();
    for (size_t s = 0; s < slots.size(); ++s) {
      HostTensor one = f32_tensor({1, d.Hv, d.Dv, d.Dk});
      for (int64_t i = 0; i < n_state; ++i) one.set(i, before[slots[s] * n_state + i]);
      const int64_t n = qsl[s + 1] - qsl[s];
      const auto alone = run_delta(*be, d, tok.rows(d, qsl[s], n), one, {0, n}, {0}, {init[s]}, algo);
      for (int64_t i = 0; i < static_cast<int64_t>(alone.size()); ++i)
        ASSERT_EQ(alone[i], batched[qsl[s] * d.Hv * d.Dv + i]) << "sequence " << s;
      const auto ovals = one.values();
      for (int64_t i = 0; i < n_state; ++i) ASSERT_EQ(ovals[i], bvals[slots[s] * n_state + i]) << "state " << s;
    }
  }
}

// ---------------------------------------------------------------- speculative states

// Slot `slot` of a [slots, ...] tensor (or [slots, K, ...] at index j) as values.
std::vector<double> slab(const std::vector<double>& v, int64_t index, int64_t per) {
  return {v.begin() + index * per, v.begin() + (index + 1) * per};
}
std::vector<double> slab(const HostTensor& t, int64_t index, int64_t per) { return slab(t.values(), index, per); }

// A verify step of 1 + drafts tokens per sequence saves the state after each
// of its tokens but the last, exactly what running only those tokens leaves
// (a longer prefill chunk in the same step saves none); select_state then
// restores any of them.
TEST(SpecStates, DeltaRuleSavesEveryPrefixStateAndSelectStateRestoresIt) {
  auto be = make_cpu_backend();
  Rng rng(fresh_seed());
  DeltaSetup d(rng, 2, 4, 16, 8);
  const int64_t K = 3, per = d.Hv * d.Dv * d.Dk;
  const std::vector<int64_t> qsl{0, 4, 6, 10, 16}, slots{2, 0, 1, 3}, init{1, 1, 0, 1};
  DeltaTokens tok(rng, d, 16);
  HostTensor state = f32_tensor({4, d.Hv, d.Dv, d.Dk}), spec = f32_tensor({4, K, d.Hv, d.Dv, d.Dk});
  state.fill_normal(rng, 0.1);
  spec.poison();
  const std::vector<double> initial = state.values();
  HostTensor q = i32_tensor(qsl), sl = i32_tensor(slots), in = i32_tensor(init), out = bf16_tensor({16, d.Hv * d.Dv});
  GatedDeltaRuleArgs a{tok.qkv.view(), ColSlice(tok.ab.view(), d.Hv, d.Hv), ColSlice(tok.ab.view(), 0, d.Hv),
                       d.alog.view(), d.dt.view(), state.view(), q.view(), sl.view(), in.view(), out.view(),
                       d.Hk, d.Hv, d.Dk, d.Dv, DeltaRuleAlgorithm::kChunked, 0};
  a.spec_states = spec.view();
  gated_delta_rule(*be, a);
  for (size_t s = 0; s < slots.size(); ++s) {
    const int64_t n = qsl[s + 1] - qsl[s];
    if (n > K + 1) {
      for (double v : slab(spec, slots[s], K * per)) EXPECT_TRUE(std::isnan(v)) << "a prefill saves nothing";
      continue;
    }
    for (int64_t j = 0; j < n - 1; ++j) {
      HostTensor alone = f32_tensor({1, d.Hv, d.Dv, d.Dk});
      const auto start = slab(initial, slots[s], per);
      for (int64_t i = 0; i < per; ++i) alone.set(i, init[s] ? start[static_cast<size_t>(i)] : 0.0);
      run_delta(*be, d, tok.rows(d, qsl[s], j + 1), alone, {0, j + 1}, {0}, {init[s]}, DeltaRuleAlgorithm::kRecurrent);
      EXPECT_EQ(slab(spec, slots[s] * K + j, per), alone.values()) << "sequence " << s << " token " << j;
    }
  }
  const auto saved_2_1 = slab(spec, 2 * K + 1, per), saved_1_0 = slab(spec, 1 * K + 0, per);
  const auto final_0 = slab(state, 0, per);
  HostTensor keep = i32_tensor({1, -1, 0, -1});
  select_state(*be, {state.view(), spec.view(), sl.view(), keep.view()});
  EXPECT_EQ(slab(state, 2, per), saved_2_1);
  EXPECT_EQ(slab(state, 0, per), final_0) << "keep -1 leaves the state";
  EXPECT_EQ(slab(state, 1, per), saved_1_0);

  HostTensor too_far = i32_tensor({K, -1, -1, -1});
  EXPECT_THROW(select_state(*be, {state.view(), spec.view(), sl.view(), too_far.view()}), Error);
  HostTensor wrong = f32_tensor({4, K, d.Hv, d.Dv, d.Dk + 1});
  EXPECT_THROW(select_state(*be, {state.view(), wrong.view(), sl.view(), keep.view()}), Error);
}

TEST(SpecStates, ConvSavesEveryPrefixWindow) {
  auto be = make_cpu_backend();
  Rng rng(fresh_seed());
  ConvSetup cs(rng, 37, 4);
  const int64_t K = 4, H = cs.K - 1, per = H * cs.C;
  const std::vector<int64_t> qsl{0, 5, 7, 9}, slots{1, 2, 0}, init{1, 1, 0};
  HostTensor x = bf16_tensor({9, cs.C + 5}), state = bf16_tensor({3, H, cs.C}), spec = bf16_tensor({3, K, H, cs.C});
  x.fill_normal(rng, 2.0);
  state.fill_normal(rng, 2.0);
  spec.poison();
  const std::vector<double> initial = state.values();
  HostTensor q = i32_tensor(qsl), sl = i32_tensor(slots), in = i32_tensor(init), out = bf16_tensor({9, cs.C});
  gdn_conv(*be, {ColSlice(x.view(), 3, cs.C), cs.w.view(), state.view(), q.view(), sl.view(), in.view(), out.view(),
                 spec.view()});
  for (size_t s = 0; s < slots.size(); ++s) {
    const int64_t n = qsl[s + 1] - qsl[s];
    for (int64_t j = 0; j < n - 1; ++j) {
      HostTensor xs = bf16_tensor({j + 1, cs.C + 5}), alone = bf16_tensor({1, H, cs.C});
      for (int64_t i = 0; i < xs.numel(); ++i) xs.set(i, x.v[qsl[s] * (cs.C + 5) + i]);
      const auto start = slab(initial, slots[s], per);
      for (int64_t i = 0; i < per; ++i) alone.set(i, start[static_cast<size_t>(i)]);
      run_conv(*be, cs, xs, alone, {0, j + 1}, {0}, {init[s]});
      EXPECT_EQ(slab(spec, slots[s] * K + j, per), alone.values()) << "sequence " << s << " token " << j;
    }
  }
  const auto saved = slab(spec, 1 * K + 2, per);
  HostTensor keep = i32_tensor({2, -1, -1});
  select_state(*be, {state.view(), spec.view(), sl.view(), keep.view()});
  EXPECT_EQ(slab(state, 1, per), saved);
}


// ---------------------------------------------------------------- state saves

// A prefix-cache save: each sequence with a save slot also leaves, in that
// slot, exactly the state that running only its first save_len tokens
// leaves (conv window and recurrent state), while its outputs and its own
// final state are those of the call without saves. Saves inside the conv's
// history (save_len < K - 1), in the middle of a multi-chunk sequence and
// at a sequence's end are covered.
TEST(StateSave, ConvAndDeltaRuleSaveTheStateAfterAPrefix) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  DeltaSetup d(rng, 2, 4, 16, 8);
  ConvSetup cs(rng, 37, 4);
  const int64_t H = cs.K - 1, per = d.Hv * d.Dv * d.Dk, conv_per = H * cs.C, slots = 7;
  const std::vector<int64_t> qsl{0, 40, 45, 175, 178}, own{0, 1, 2, 5}, init{1, 0, 1, 1};
  const std::vector<int64_t> save_slots{3, -1, 4, 6}, save_lens{2, 0, 97, 3};
  const int64_t T = qsl.back();
  DeltaTokens tok(rng, d, T);
  HostTensor x = bf16_tensor({T, cs.C + 5});
  x.fill_normal(rng, 2.0);
  HostTensor state0 = f32_tensor({slots, d.Hv, d.Dv, d.Dk}), conv0 = bf16_tensor({slots, H, cs.C});
  state0.fill_normal(rng, 0.1);
  conv0.fill_normal(rng, 2.0);
  HostTensor q = i32_tensor(qsl), sl = i32_tensor(own), in = i32_tensor(init);

  auto copy_of = [](const HostTensor& t, std::initializer_list<int64_t> shape, bool bf16) {
    HostTensor c = bf16 ? bf16_tensor(shape) : f32_tensor(shape);
    for (int64_t i = 0; i < c.numel(); ++i) c.set(i, t.v[i]);
    return c;
  };
  // Without saves: the reference outputs and final states.
  HostTensor plain_state = copy_of(state0, {slots, d.Hv, d.Dv, d.Dk}, false);
  HostTensor plain_conv = copy_of(conv0, {slots, H, cs.C}, true);
  const auto plain_out = run_delta(*be, d, tok, plain_state, qsl, own, init, DeltaRuleAlgorithm::kChunked);
  const auto plain_conv_out = run_conv(*be, cs, x, plain_conv, qsl, own, init);

  HostTensor ss = i32_tensor(save_slots), sn = i32_tensor(save_lens);
  HostTensor state = copy_of(state0, {slots, d.Hv, d.Dv, d.Dk}, false);
  HostTensor conv = copy_of(conv0, {slots, H, cs.C}, true);
  HostTensor out = bf16_tensor({T, d.Hv * d.Dv}), conv_out = bf16_tensor({T, cs.C});
  GatedDeltaRuleArgs a{tok.qkv.view(), ColSlice(tok.ab.view(), d.Hv, d.Hv), ColSlice(tok.ab.view(), 0, d.Hv),
                       d.alog.view(), d.dt.view(), state.view(), q.view(), sl.view(), in.view(), out.view(),
                       d.Hk, d.Hv, d.Dk, d.Dv, DeltaRuleAlgorithm::kChunked, 0};
  a.save = {ss.view(), sn.view()};
  gated_delta_rule(*be, a);
  GdnConvArgs c{ColSlice(x.view(), 3, cs.C), cs.w.view(), conv.view(), q.view(), sl.view(), in.view(),
                conv_out.view()};
  c.save = {ss.view(), sn.view()};
  gdn_conv(*be, c);

  EXPECT_EQ(out.values(), plain_out);
  EXPECT_EQ(conv_out.values(), plain_conv_out);
  for (int64_t slot : own) {
    EXPECT_EQ(slab(state, slot, per), slab(plain_state, slot, per)) << "own slot " << slot;
    EXPECT_EQ(slab(conv, slot, conv_per), slab(plain_conv, slot, conv_per)) << "own slot " << slot;
  }
  for (size_t s = 0; s < own.size(); ++s) {
    if (save_slots[s] < 0) continue;
    const int64_t n = save_lens[s];
    HostTensor alone = f32_tensor({1, d.Hv, d.Dv, d.Dk}), conv_alone = bf16_tensor({1, H, cs.C});
    const auto start = slab(state0, own[s], per), conv_start = slab(conv0, own[s], conv_per);
    for (int64_t i = 0; i < per; ++i) alone.set(i, start[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < conv_per; ++i) conv_alone.set(i, conv_start[static_cast<size_t>(i)]);
    run_delta(*be, d, tok.rows(d, qsl[s], n), alone, {0, n}, {0}, {init[s]}, DeltaRuleAlgorithm::kChunked);
    HostTensor xs = bf16_tensor({n, cs.C + 5});
    for (int64_t i = 0; i < xs.numel(); ++i) xs.set(i, x.v[qsl[s] * (cs.C + 5) + i]);
    run_conv(*be, cs, xs, conv_alone, {0, n}, {0}, {init[s]});
    EXPECT_EQ(slab(state, save_slots[s], per), alone.values()) << "sequence " << s;
    EXPECT_EQ(slab(conv, save_slots[s], conv_per), conv_alone.values()) << "sequence " << s;
  }

  // A save slot the call uses, a length outside [1, n], a missing length.
  HostTensor used = i32_tensor({3, -1, 4, 0}), too_long = i32_tensor({41, 0, 97, 3}), zero = i32_tensor({0, 0, 1, 1});
  for (const auto& [slots_t, lens_t] : {std::pair{&used, &sn}, std::pair{&ss, &too_long}, std::pair{&ss, &zero}}) {
    a.save = {slots_t->view(), lens_t->view()};
    c.save = a.save;
    EXPECT_THROW(gated_delta_rule(*be, a), Error);
    EXPECT_THROW(gdn_conv(*be, c), Error);
  }
  a.save = {ss.view(), {}};
  EXPECT_THROW(gated_delta_rule(*be, a), Error);
}

}  // namespace
}  // namespace hyllm::test
