// attention_prep (q/gate split, q/k norm, partial NeoX RoPE, paged KV write)
// and paged_attention against double references; paging and batching must
// not change a single bit.
#include <algorithm>
#include <numeric>

#include "ops_test_util.h"

namespace hyllm::test {
namespace {

constexpr int64_t Hq = 4, Hkv = 2, D = 32, RD = 8, BS = 4;
constexpr float kTheta = 10000.0f;

// The rotary angle as the model defines it (HF computes inv_freq and
// position * inv_freq in fp32): the fp32 product, taken as exact from there.
// A double angle would differ by up to 5e-4 rad at position 5000, which a
// rotation that cancels turns into many ulps of a small result.
double rope_angle(int64_t pos, int64_t i) {
  const float inv_freq = static_cast<float>(std::pow(static_cast<double>(kTheta), -2.0 * i / RD));
  return static_cast<double>(static_cast<float>(pos) * inv_freq);
}

// Double reference of one head (RMSNorm1p, bf16, RoPE on the first RD dims)
// with the error a correct fp32 kernel may show on each element. Rounding the
// normed value to bf16 is the one step where fp32 and double may land on
// different neighbours, one ulp (at most 2^-7 of the value) apart; a rotated
// element mixes two such values, so its bound scales with both terms, not
// with the result, which cancellation can make small. Rounding the result
// adds half an ulp of it (at most 2^-8 of it).
struct HeadRef {
  std::vector<double> value, bound;
};

HeadRef norm_rope_ref(const double* x, const std::vector<double>& w, int64_t pos) {
  double ss = 0.0;
  for (int64_t d = 0; d < D; ++d) ss += x[d] * x[d];
  const double inv = 1.0 / std::sqrt(ss / D + 1e-6);
  std::vector<double> n(D);
  HeadRef r{std::vector<double>(D), std::vector<double>(D)};
  for (int64_t d = 0; d < D; ++d) n[d] = bf16_round(x[d] * inv * (1.0 + w[d]));
  constexpr int64_t half = RD / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double ang = rope_angle(pos, i), c = std::cos(ang), s = std::sin(ang);
    r.value[i] = n[i] * c - n[i + half] * s;
    r.value[i + half] = n[i + half] * c + n[i] * s;
    r.bound[i] = std::ldexp(std::fabs(n[i] * c) + std::fabs(n[i + half] * s), -7) +
                 std::ldexp(std::fabs(r.value[i]), -8);
    r.bound[i + half] = std::ldexp(std::fabs(n[i + half] * c) + std::fabs(n[i] * s), -7) +
                        std::ldexp(std::fabs(r.value[i + half]), -8);
  }
  for (int64_t d = RD; d < D; ++d) {
    r.value[d] = n[d];
    r.bound[d] = std::ldexp(std::fabs(n[d]), -7);
  }
  return r;
}

// Elements further from the reference than its bound (plus an absolute
// floor for fp32's own rounding of the rotation).
int64_t outside_bound(const std::vector<double>& got, const HeadRef& want) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(got[i] - want.value[i]) <= want.bound[i] + 1e-5);
  return bad;
}

struct Projections {
  HostTensor qkv, qn, kn;  // qkv: [T, Hq*2D | Hkv*D | Hkv*D] merged, as a merged GEMM writes it
  Projections(Rng& rng, int64_t T)
      : qkv(bf16_tensor({T, Hq * 2 * D + 2 * Hkv * D})), qn(bf16_tensor({D})), kn(f32_tensor({D})) {
    qkv.fill_normal(rng, 2.0);
    qn.fill_normal(rng, 0.3);
    kn.fill_normal(rng, 0.3);
  }
  ColSlice q_gate() const { return ColSlice(qkv.view(), 0, Hq * 2 * D); }
  ColSlice k() const { return ColSlice(qkv.view(), Hq * 2 * D, Hkv * D); }
  ColSlice v() const { return ColSlice(qkv.view(), Hq * 2 * D + Hkv * D, Hkv * D); }
};

// How a test's paged cache stores K/V: bf16, or e4m3 codes with scales.
struct CacheFormat {
  DType dtype = DType::kBF16;
  float k_scale = 1.0f, v_scale = 1.0f;
  // The value an element of the cache stands for.
  double k_value(double stored) const { return dtype == DType::kBF16 ? stored : stored * k_scale; }
  double v_value(double stored) const { return dtype == DType::kBF16 ? stored : stored * v_scale; }
};

struct Cache {
  HostTensor k, v;
  CacheFormat format;
  explicit Cache(int64_t blocks, CacheFormat f = {})
      : k(f.dtype, {blocks, BS, Hkv, D}), v(f.dtype, {blocks, BS, Hkv, D}), format(f) {
    k.poison();
    v.poison();
  }
  KvCacheView view() const { return {k.view(), v.view(), format.k_scale, format.v_scale}; }
};

// The e4m3 code an FP8 cache holds for x (ops.h KvCacheView), computed here
// independently of the kernel: saturate x / scale, then round.
uint8_t expected_code(double x, float scale) {
  const float q = static_cast<float>(x) / scale;
  if (std::isnan(q)) return f32_to_f8e4m3(q);
  return f32_to_f8e4m3(std::clamp(q, -448.0f, 448.0f));
}

TEST(AttentionPrep, NormRopeSplitAndCacheWrite) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t T = 6;
  Projections p(rng, T);
  HostTensor pos = i32_tensor({0, 1, 7, 100, 5000, 3}), slots = i32_tensor({5, -1, 0, 11, 2, 7});
  Cache cache(3);
  HostTensor q = bf16_tensor({T, Hq * D}), gate = bf16_tensor({T, Hq * D});
  q.poison();
  gate.poison();
  AttentionPrepArgs a{p.q_gate(), p.k(), p.v(), p.qn.view(), p.kn.view(), pos.view(), slots.view(), q.view(),
                      gate.view(), cache.view(), Hq, Hkv, D, RD, kTheta, 1e-6f};
  attention_prep(*be, a);
  const int64_t W = p.qkv.view().dim(1);
  std::vector<double> got_q, got_k;
  HeadRef want_q, want_k;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < Hq; ++h) {
      const HeadRef r = norm_rope_ref(p.qkv.v.data() + t * W + h * 2 * D, p.qn.v, pos.v[t]);
      for (int64_t d = 0; d < D; ++d) {
        want_q.value.push_back(r.value[d]);
        want_q.bound.push_back(r.bound[d]);
        got_q.push_back(q.get((t * Hq + h) * D + d));
        ASSERT_EQ(gate.get((t * Hq + h) * D + d), p.qkv.v[t * W + h * 2 * D + D + d]);  // per-head split
      }
    }
    const int64_t slot = static_cast<int64_t>(slots.v[t]);
    for (int64_t h = 0; h < Hkv; ++h) {
      const HeadRef r = norm_rope_ref(p.qkv.v.data() + t * W + Hq * 2 * D + h * D, p.kn.v, pos.v[t]);
      for (int64_t d = 0; d < D; ++d) {
        if (slot < 0) continue;
        want_k.value.push_back(r.value[d]);
        want_k.bound.push_back(r.bound[d]);
        got_k.push_back(cache.k.get((slot * Hkv + h) * D + d));
        ASSERT_EQ(cache.v.get((slot * Hkv + h) * D + d), p.qkv.v[t * W + Hq * 2 * D + Hkv * D + h * D + d]);
      }
    }
  }
  EXPECT_EQ(outside_bound(got_q, want_q), 0);
  EXPECT_EQ(outside_bound(got_k, want_k), 0);
  // Slots nobody wrote keep their poison.
  for (int64_t s : {1, 3, 4, 6, 8, 9, 10}) EXPECT_TRUE(std::isnan(cache.k.get(s * Hkv * D))) << s;

  // Dims at or past rotary_dim do not depend on the position; rotated dims do.
  HostTensor pos2 = i32_tensor({9, 2, 70, 3, 1, 99}), q2 = bf16_tensor({T, Hq * D}), g2 = bf16_tensor({T, Hq * D});
  a.positions = pos2.view();
  a.q_out = q2.view();
  a.gate_out = g2.view();
  attention_prep(*be, a);
  int64_t rotated_changed = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = (t * Hq + h) * D + d;
        if (d >= RD) {
          ASSERT_EQ(q.get(i), q2.get(i)) << "pass-through dim " << d << " changed";
        } else {
          rotated_changed += q.get(i) != q2.get(i);
        }
      }
  EXPECT_GT(rotated_changed, T * Hq * RD / 2);
}

// A batch of sequences (context length, new tokens) laid out in a paged cache.
struct Batch {
  std::vector<int64_t> ctx, qlen;
  int64_t T = 0, S = 0, max_blocks = 0;
  std::vector<int64_t> qsl, seq_lens, positions;
  Batch(std::vector<int64_t> c, std::vector<int64_t> q) : ctx(std::move(c)), qlen(std::move(q)) {
    S = static_cast<int64_t>(ctx.size());
    qsl.push_back(0);
    for (int64_t s = 0; s < S; ++s) {
      seq_lens.push_back(ctx[s] + qlen[s]);
      max_blocks = std::max(max_blocks, (seq_lens[s] + BS - 1) / BS);
      for (int64_t j = 0; j < qlen[s]; ++j) positions.push_back(ctx[s] + j);
      qsl.push_back(qsl.back() + qlen[s]);
    }
    T = qsl.back();
  }
  // Block tables: sequence s gets max_blocks blocks, either in order or shuffled.
  std::vector<int64_t> tables(bool shuffled, Rng& rng) const {
    std::vector<int64_t> ids(static_cast<size_t>(S * max_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    if (shuffled) std::shuffle(ids.begin(), ids.end(), rng.gen());
    return ids;
  }
};

// Runs attention for the batch: the context tokens' k/v are put in the cache by
// a first attention_prep call, the new tokens' by a second, then attention.
// Token inputs are taken from `proj` rows: context rows first (sequence by
// sequence), then new-token rows.
// k_cache / v_cache receive the values the cache stands for (codes times
// their scale for an e4m3 cache).
std::vector<double> run_attention(Backend& be, const Batch& b, const Projections& ctx_proj,
                                  const Projections& new_proj, const HostTensor& gate_src,
                                  const std::vector<int64_t>& tables, std::vector<double>* q_vals = nullptr,
                                  std::vector<double>* k_cache = nullptr, std::vector<double>* v_cache = nullptr,
                                  CacheFormat format = {}) {
  Cache cache(b.S * b.max_blocks, format);
  auto slot_of = [&](int64_t s, int64_t p) { return tables[s * b.max_blocks + p / BS] * BS + p % BS; };
  std::vector<int64_t> ctx_pos, ctx_slots, new_slots;
  for (int64_t s = 0; s < b.S; ++s)
    for (int64_t p = 0; p < b.ctx[s]; ++p) {
      ctx_pos.push_back(p);
      ctx_slots.push_back(slot_of(s, p));
    }
  for (int64_t s = 0; s < b.S; ++s)
    for (int64_t j = 0; j < b.qlen[s]; ++j) new_slots.push_back(slot_of(s, b.ctx[s] + j));
  const int64_t Tc = static_cast<int64_t>(ctx_pos.size());
  HostTensor cpos = i32_tensor(ctx_pos), cslots = i32_tensor(ctx_slots), cq = bf16_tensor({Tc, Hq * D}),
             cg = bf16_tensor({Tc, Hq * D});
  attention_prep(be, {ctx_proj.q_gate(), ctx_proj.k(), ctx_proj.v(), ctx_proj.qn.view(), ctx_proj.kn.view(),
                      cpos.view(), cslots.view(), cq.view(), cg.view(), cache.view(), Hq, Hkv, D, RD, kTheta, 1e-6f});
  HostTensor npos = i32_tensor(b.positions), nslots = i32_tensor(new_slots), q = bf16_tensor({b.T, Hq * D}),
             g = bf16_tensor({b.T, Hq * D});
  attention_prep(be, {new_proj.q_gate(), new_proj.k(), new_proj.v(), new_proj.qn.view(), new_proj.kn.view(),
                      npos.view(), nslots.view(), q.view(), g.view(), cache.view(), Hq, Hkv, D, RD, kTheta, 1e-6f});
  HostTensor bt(DType::kI32, {b.S, b.max_blocks});
  bt.fill_ints(tables);
  HostTensor qsl = i32_tensor(b.qsl), lens = i32_tensor(b.seq_lens),
             out = bf16_tensor({b.T, Hq * D});
  out.poison();
  PagedAttentionArgs a{q.view(), cache.view(), bt.view(), qsl.view(), lens.view(), gate_src.view(), out.view(),
                       Hq, Hkv, D, 0.0f, 0, 0};
  paged_attention(be, a);
  if (q_vals) *q_vals = q.values();
  // The cache in logical order: sequence s, position p.
  if (k_cache) {
    k_cache->clear();
    v_cache->clear();
    for (int64_t s = 0; s < b.S; ++s)
      for (int64_t p = 0; p < b.seq_lens[s]; ++p)
        for (int64_t i = 0; i < Hkv * D; ++i) {
          k_cache->push_back(format.k_value(cache.k.get(slot_of(s, p) * Hkv * D + i)));
          v_cache->push_back(format.v_value(cache.v.get(slot_of(s, p) * Hkv * D + i)));
        }
  }
  return out.values();
}

// Double reference of gated attention from q and the cache values in
// logical order (sequence by sequence, position by position).
std::vector<double> reference_attention(const Batch& b, const std::vector<double>& qv, const std::vector<double>& kc,
                                        const std::vector<double>& vc, const HostTensor& gate) {
  std::vector<double> want(static_cast<size_t>(b.T * Hq * D));
  int64_t cache_base = 0;
  for (int64_t s = 0; s < b.S; ++s) {
    for (int64_t j = 0; j < b.qlen[s]; ++j) {
      const int64_t t = b.qsl[s] + j, visible = b.ctx[s] + j + 1;
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kvh = h / (Hq / Hkv);
        std::vector<double> sc(static_cast<size_t>(visible));
        double mx = -INFINITY, sum = 0.0;
        for (int64_t p = 0; p < visible; ++p) {
          double d = 0.0;
          for (int64_t i = 0; i < D; ++i)
            d += qv[(t * Hq + h) * D + i] * kc[(cache_base + p) * Hkv * D + kvh * D + i];
          sc[p] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[p]);
        }
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < D; ++i) {
          double o = 0.0;
          for (int64_t p = 0; p < visible; ++p) o += sc[p] / sum * vc[(cache_base + p) * Hkv * D + kvh * D + i];
          want[(t * Hq + h) * D + i] = bf16_round(o) * sigmoid(gate.v[(t * Hq + h) * D + i]);
        }
      }
    }
    cache_base += b.seq_lens[s];
  }
  return want;
}

TEST(PagedAttention, MatchesDoubleReferenceAndIgnoresPagingAndBatching) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  // Prefill from scratch, chunked prefill over a cached prefix, decode, and a
  // prefill longer than the kernel's 32-token query tile.
  Batch b({0, 9, 13, 0}, {5, 3, 1, 45});
  int64_t Tc = 0;
  for (int64_t c : b.ctx) Tc += c;
  Projections ctx_proj(rng, Tc), new_proj(rng, b.T);
  new_proj.qn = HostTensor(DType::kBF16, {D});
  new_proj.kn = HostTensor(DType::kF32, {D});
  for (int64_t d = 0; d < D; ++d) {
    new_proj.qn.set(d, ctx_proj.qn.v[d]);
    new_proj.kn.set(d, ctx_proj.kn.v[d]);
  }
  HostTensor gate = bf16_tensor({b.T, Hq * D});
  gate.fill_normal(rng, 2.0);

  std::vector<double> qv, kc, vc;
  const auto contiguous = run_attention(*be, b, ctx_proj, new_proj, gate, b.tables(false, rng), &qv, &kc, &vc);
  const auto shuffled = run_attention(*be, b, ctx_proj, new_proj, gate, b.tables(true, rng));
  ASSERT_EQ(contiguous, shuffled) << "block placement changed the result";

  // Double reference from the kernel's own q and cache contents.
  const auto want = reference_attention(b, qv, kc, vc, gate);
  // Two roundings: o (where fp32 and double land on either side of a bf16
  // rounding boundary, one bf16 step: up to 2^-7 relative, two of
  // bf16_mismatches' 2^-8 units) and the gated o (half a step).
  EXPECT_EQ(bf16_mismatches(contiguous, want, 3.01, 1e-5), 0);

  // Each sequence alone gives the same bits as in the batch.
  int64_t ctx_row = 0;
  for (int64_t s = 0; s < b.S; ++s) {
    Batch one({b.ctx[s]}, {b.qlen[s]});
    Projections cp(rng, b.ctx[s]), np(rng, b.qlen[s]);
    for (auto [dst, src, row0] : {std::tuple{&cp, &ctx_proj, ctx_row}, std::tuple{&np, &new_proj, b.qsl[s]}}) {
      const int64_t W = src->qkv.view().dim(1);
      for (int64_t i = 0; i < dst->qkv.numel(); ++i) dst->qkv.set(i, src->qkv.v[row0 * W + i]);
      for (int64_t d = 0; d < D; ++d) {
        dst->qn.set(d, src->qn.v[d]);
        dst->kn.set(d, src->kn.v[d]);
      }
    }
    HostTensor g1 = bf16_tensor({b.qlen[s], Hq * D});
    for (int64_t i = 0; i < g1.numel(); ++i) g1.set(i, gate.v[b.qsl[s] * Hq * D + i]);
    const auto alone = run_attention(*be, one, cp, np, g1, one.tables(true, rng));
    for (int64_t i = 0; i < static_cast<int64_t>(alone.size()); ++i)
      ASSERT_EQ(alone[i], contiguous[b.qsl[s] * Hq * D + i]) << "sequence " << s << " element " << i;
    ctx_row += b.ctx[s];
  }
}

// Batch invariance (cpu_kernels.h): a token's output is the same bits whether
// it is one row of a long prefill (past the 32-row query tile) or a decode
// step over the same cached context.
TEST(PagedAttention, PrefillRowEqualsItsDecodeStep) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  constexpr int64_t T = 40;
  Projections all(rng, T);
  HostTensor gate = bf16_tensor({T, Hq * D});
  gate.fill_normal(rng, 2.0);
  // Token 0 is cached context, tokens 1.. arrive in one prefill chunk.
  auto rows_of = [&](int64_t row0, int64_t n) {
    Projections p(rng, n);
    const int64_t W = all.qkv.view().dim(1);
    for (int64_t i = 0; i < p.qkv.numel(); ++i) p.qkv.set(i, all.qkv.v[row0 * W + i]);
    for (int64_t d = 0; d < D; ++d) {
      p.qn.set(d, all.qn.v[d]);
      p.kn.set(d, all.kn.v[d]);
    }
    return p;
  };
  auto gate_of = [&](int64_t row0, int64_t n) {
    HostTensor g = bf16_tensor({n, Hq * D});
    for (int64_t i = 0; i < g.numel(); ++i) g.set(i, gate.v[row0 * Hq * D + i]);
    return g;
  };
  Batch prefill({1}, {T - 1});
  const auto whole =
      run_attention(*be, prefill, rows_of(0, 1), rows_of(1, T - 1), gate_of(1, T - 1), prefill.tables(false, rng));
  for (int64_t j = 1; j < T; j += 3) {
    Batch step({j}, {1});
    const auto one = run_attention(*be, step, rows_of(0, j), rows_of(j, 1), gate_of(j, 1), step.tables(true, rng));
    for (int64_t i = 0; i < Hq * D; ++i) ASSERT_EQ(one[i], whole[(j - 1) * Hq * D + i]) << "token " << j;
  }
}

// An e4m3 cache holds e4m3(clamp(x / scale)) of exactly the bf16 values a
// bf16 cache would hold (k after norm and RoPE, raw v); q and gate are not
// affected by the cache format.
TEST(AttentionPrep, Fp8CacheHoldsSaturatedCodesOfTheBf16Values) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  const int64_t T = 5;
  Projections p(rng, T);
  // Values past the e4m3 range at scale 0.05 (|v| > 22.4, where the random
  // values, sd 2, never reach) saturate; a NaN stays NaN.
  const int64_t W = p.qkv.view().dim(1), v0 = Hq * 2 * D + Hkv * D;
  p.qkv.set(0 * W + v0 + 3, 40.0);
  p.qkv.set(1 * W + v0 + 5, -1000.0);
  p.qkv.set(4 * W + v0 + 7, NAN);
  HostTensor pos = i32_tensor({3, 0, 90, 17, 2}), slots = i32_tensor({2, 7, -1, 0, 5});
  const CacheFormat fp8{DType::kF8E4M3, 0.05f, 0.05f};
  Cache bf(2), f8(2, fp8);
  HostTensor q1 = bf16_tensor({T, Hq * D}), g1 = bf16_tensor({T, Hq * D}), q2 = bf16_tensor({T, Hq * D}),
             g2 = bf16_tensor({T, Hq * D});
  for (auto [cache, q, g] : {std::tuple{&bf, &q1, &g1}, std::tuple{&f8, &q2, &g2}}) {
    attention_prep(*be, {p.q_gate(), p.k(), p.v(), p.qn.view(), p.kn.view(), pos.view(), slots.view(), q->view(),
                         g->view(), cache->view(), Hq, Hkv, D, RD, kTheta, 1e-6f});
  }
  EXPECT_EQ(0, std::memcmp(q1.buf.data(), q2.buf.data(), q1.buf.size()));
  EXPECT_EQ(0, std::memcmp(g1.buf.data(), g2.buf.data(), g1.buf.size()));
  int64_t saturated = 0, nans = 0, written = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (slots.v[t] < 0) continue;
    for (int64_t i = 0; i < Hkv * D; ++i) {
      const int64_t e = static_cast<int64_t>(slots.v[t]) * Hkv * D + i;
      ASSERT_EQ(f8.k.buf.data_as<uint8_t>()[e], expected_code(bf.k.get(e), fp8.k_scale)) << "k element " << e;
      ASSERT_EQ(f8.v.buf.data_as<uint8_t>()[e], expected_code(bf.v.get(e), fp8.v_scale)) << "v element " << e;
      saturated += std::fabs(f8.v.get(e)) == 448.0;
      nans += std::isnan(f8.v.get(e));
      ++written;
    }
  }
  EXPECT_EQ(saturated, 2);
  EXPECT_EQ(nans, 1);
  EXPECT_EQ(written, 4 * Hkv * D);
  // The codes use the range: k / 0.05 of unit-scale k reaches past 16.
  double kmax = 0;
  for (int64_t e = 0; e < f8.k.numel(); ++e)
    if (!std::isnan(f8.k.get(e))) kmax = std::max(kmax, std::fabs(f8.k.get(e)));
  EXPECT_GT(kmax, 16.0);
}

// Attention over an e4m3 cache equals the double reference computed from the
// dequantised cache (float(code) * scale): the folded scales change nothing
// but fp32 rounding. Paging does not change a bit, and the FP8 result stays
// within e4m3's rounding of the bf16-cache result.
TEST(PagedAttention, Fp8CacheMatchesDequantisedReference) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  Batch b({0, 9, 13, 0}, {5, 3, 1, 45});
  int64_t Tc = 0;
  for (int64_t c : b.ctx) Tc += c;
  Projections ctx_proj(rng, Tc), new_proj(rng, b.T);
  for (int64_t d = 0; d < D; ++d) {
    new_proj.qn.set(d, ctx_proj.qn.v[d]);
    new_proj.kn.set(d, ctx_proj.kn.v[d]);
  }
  HostTensor gate = bf16_tensor({b.T, Hq * D});
  gate.fill_normal(rng, 2.0);
  for (const CacheFormat fp8 : {CacheFormat{DType::kF8E4M3, 1.0f, 1.0f}, CacheFormat{DType::kF8E4M3, 0.0125f, 0.04f}}) {
    SCOPED_TRACE(testing::Message() << "k_scale " << fp8.k_scale << " v_scale " << fp8.v_scale);
    std::vector<double> qv, kc, vc;
    const auto got = run_attention(*be, b, ctx_proj, new_proj, gate, b.tables(false, rng), &qv, &kc, &vc, fp8);
    const auto shuffled = run_attention(*be, b, ctx_proj, new_proj, gate, b.tables(true, rng), nullptr, nullptr,
                                        nullptr, fp8);
    ASSERT_EQ(got, shuffled) << "block placement changed the result";
    EXPECT_EQ(bf16_mismatches(got, reference_attention(b, qv, kc, vc, gate), 3.01, 1e-5), 0);
    const auto bf16 = run_attention(*be, b, ctx_proj, new_proj, gate, b.tables(false, rng));
    const double err = normalized_error(got, bf16);
    // e4m3 rounds K and V by up to 2^-4 relatively; the weighted sum
    // averages that down, though a sharp softmax passes one key's error on.
    EXPECT_LT(err, 0.25);
    EXPECT_GT(err, 0.0);
  }
}

}  // namespace
}  // namespace hyllm::test
