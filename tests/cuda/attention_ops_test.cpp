// Harness: attention_prep and paged_attention (prefill, decode with split KV,
// mixed batches, GQA groups, head sizes 32-256), with bf16 and e4m3 caches.
#include <algorithm>
#include <numeric>

#include "cuda_test_util.h"

namespace hyllm::test {
namespace {

// One e4m3 step of the largest element: an FP8 code whose bf16 input differs
// by a rounding between the backends may land on the neighbouring code.
constexpr double kTolFp8Code = 1.0 / 8;

TEST_F(CudaOpTest, AttentionPrep) {
  Rng rng(seed_);
  struct Cfg {
    int64_t Hq, Hkv, D, RD;
    bool fp8;
    int64_t T;  // tokens; 0: random in [1, 41]
  };
  // The 27B and 35B-A3B shapes (24 / 16 q heads, 4 / 2 kv heads, head 256,
  // rotary 64) at decode batches 1, 8 and 32, and odd shapes at random sizes.
  const std::vector<Cfg> cfgs = {
      Cfg{4, 2, 32, 8, false, 0},    Cfg{4, 2, 64, 16, false, 0},   Cfg{24, 4, 256, 64, false, 0},
      Cfg{6, 2, 32, 32, false, 0},   Cfg{4, 2, 64, 16, true, 0},    Cfg{24, 4, 256, 64, true, 0},
      Cfg{24, 4, 256, 64, false, 1}, Cfg{24, 4, 256, 64, false, 8}, Cfg{24, 4, 256, 64, true, 32},
      Cfg{16, 2, 256, 64, false, 1}, Cfg{16, 2, 256, 64, true, 8},  Cfg{16, 2, 256, 64, false, 32},
      Cfg{6, 2, 128, 128, false, 3}};
  for (const Cfg& c : cfgs) {
    SCOPED_TRACE(testing::Message() << "D=" << c.D << " Hq=" << c.Hq << " T=" << c.T << (c.fp8 ? " fp8 cache" : ""));
    const DType cache_dtype = c.fp8 ? DType::kF8E4M3 : DType::kBF16;
    // Scales that keep the normed k inside the e4m3 range and saturate v's
    // tail (|v| > 4.48, 2.2 sigma).
    const float k_scale = c.fp8 ? 0.03f : 1.0f, v_scale = c.fp8 ? 0.01f : 1.0f;
    const int64_t T = c.T > 0 ? c.T : 1 + rng.integer(0, 40), BS = 16, blocks = (T + BS - 1) / BS + 2;
    const int64_t Wq = c.Hq * 2 * c.D, Wkv = c.Hkv * c.D;
    HostTensor qkv = bf16_tensor({T, Wq + 2 * Wkv}), qn = bf16_tensor({c.D}), kn = f32_tensor({c.D});
    qkv.fill_normal(rng, 2.0);
    qn.fill_normal(rng, 0.3);
    kn.fill_normal(rng, 0.3);
    std::vector<int64_t> slots(static_cast<size_t>(blocks * BS)), pos_list, slot_list;
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng.gen());
    for (int64_t t = 0; t < T; ++t) {
      pos_list.push_back(rng.integer(0, 40000));
      slot_list.push_back(t % 7 == 3 ? -1 : slots[t]);
    }
    HostTensor pos = i32_tensor(pos_list), slot = i32_tensor(slot_list);
    HostTensor kc(cache_dtype, {blocks, BS, c.Hkv, c.D}), vc(cache_dtype, {blocks, BS, c.Hkv, c.D});
    kc.fill_normal(rng);
    vc.fill_normal(rng);
    HostTensor q = bf16_tensor({T, c.Hq * c.D}), gate = bf16_tensor({T, c.Hq * c.D});
    Mirror dqkv(*gpu_, qkv), dqn(*gpu_, qn), dkn(*gpu_, kn), dpos(*gpu_, pos), dslot(*gpu_, slot), dkc(*gpu_, kc),
        dvc(*gpu_, vc), dq(*gpu_, q), dgate(*gpu_, gate);
    dq.poison();
    dgate.poison();
    auto args = [&](const TensorView& qkv_v, const TensorView& qn_v, const TensorView& kn_v, const TensorView& p,
                    const TensorView& s, const TensorView& qo, const TensorView& go, const TensorView& k,
                    const TensorView& v) {
      return AttentionPrepArgs{ColSlice(qkv_v, 0, Wq), ColSlice(qkv_v, Wq, Wkv), ColSlice(qkv_v, Wq + Wkv, Wkv),
                               qn_v, kn_v, p, s, qo, go, KvCacheView{k, v, k_scale, v_scale}, c.Hq, c.Hkv, c.D, c.RD,
                               1e7f, 1e-6f};
    };
    attention_prep(*cpu_, args(qkv.view(), qn.view(), kn.view(), pos.view(), slot.view(), q.view(), gate.view(),
                               kc.view(), vc.view()));
    attention_prep(*gpu_, args(dqkv.view(), dqn.view(), dkn.view(), dpos.view(), dslot.view(), dq.view(),
                               dgate.view(), dkc.view(), dvc.view()));
    expect_close("attention_prep q", dq, q, kTolElementwise);
    expect_equal("attention_prep gate", dgate, gate);
    if (c.fp8) {
      expect_close("attention_prep k cache fp8", dkc, kc, kTolFp8Code);
      expect_equal("attention_prep v cache fp8", dvc, vc);
    } else {
      expect_close("attention_prep k cache", dkc, kc, kTolElementwise);
      expect_equal("attention_prep v cache", dvc, vc);
    }
  }
}

struct AttnCase {
  const char* name;
  int64_t Hq, Hkv, D, BS;
  std::vector<std::pair<int64_t, int64_t>> seqs;  // (new tokens, cached context)
  bool gate;
  bool hints;
  bool fp8 = false;  // e4m3 cache with k_scale 0.05, v_scale 0.02
  // With hints: the max_seq_len passed, when above the longest sequence (a
  // decode graph's bucket bound; the splits are chosen from it).
  int64_t len_bound = 0;
};

class PagedAttentionCheck : public CudaOpTest {
 protected:
  // Runs case c on both backends (the device twice: the second run on
  // poisoned scratch and output) and compares.
  void check(const AttnCase& c);
};

void PagedAttentionCheck::check(const AttnCase& c) {
  Rng rng(seed_);
  const int64_t S = static_cast<int64_t>(c.seqs.size());
  int64_t T = 0, max_blocks = 1, total_blocks = 0, max_q = 0, max_len = 0;
  for (auto [q, ctx] : c.seqs) {
    T += q;
    const int64_t nb = (q + ctx + c.BS - 1) / c.BS;
    max_blocks = std::max(max_blocks, nb);
    total_blocks += nb;
    max_q = std::max(max_q, q);
    max_len = std::max(max_len, q + ctx);
  }
  const int64_t num_blocks = total_blocks + 3;
  std::vector<int64_t> block_ids(static_cast<size_t>(num_blocks));
  std::iota(block_ids.begin(), block_ids.end(), 0);
  std::shuffle(block_ids.begin(), block_ids.end(), rng.gen());
  std::vector<int64_t> table(static_cast<size_t>(S * max_blocks), 0), qsl{0}, lens;
  size_t next = 0;
  for (int64_t s = 0; s < S; ++s) {
    auto [q, ctx] = c.seqs[s];
    for (int64_t b = 0; b < (q + ctx + c.BS - 1) / c.BS; ++b) table[s * max_blocks + b] = block_ids[next++];
    qsl.push_back(qsl.back() + q);
    lens.push_back(q + ctx);
  }
  // An e4m3 cache holds codes: scaled so that the values they stand for
  // (code * scale) have the bf16 cases' spread.
  const DType cache_dtype = c.fp8 ? DType::kF8E4M3 : DType::kBF16;
  const float k_scale = c.fp8 ? 0.05f : 1.0f, v_scale = c.fp8 ? 0.02f : 1.0f;
  HostTensor kc(cache_dtype, {num_blocks, c.BS, c.Hkv, c.D}), vc(cache_dtype, {num_blocks, c.BS, c.Hkv, c.D});
  kc.fill_normal(rng, 1.5 / k_scale);
  vc.fill_normal(rng, 1.0 / v_scale);
  HostTensor q = bf16_tensor({T, c.Hq * c.D}), gate = bf16_tensor({T, c.Hq * c.D}), out = bf16_tensor({T, c.Hq * c.D});
  q.fill_normal(rng, 1.5);
  gate.fill_normal(rng, 2.0);
  HostTensor bt(DType::kI32, {S, max_blocks});
  bt.fill_ints(table);
  HostTensor qs = i32_tensor(qsl), sl = i32_tensor(lens);
  Mirror dkc(*gpu_, kc), dvc(*gpu_, vc), dq(*gpu_, q), dgate(*gpu_, gate), dout(*gpu_, out), dbt(*gpu_, bt),
      dqs(*gpu_, qs), dsl(*gpu_, sl);
  dout.poison();
  auto args = [&](const TensorView& qv, const TensorView& k, const TensorView& v, const TensorView& b,
                  const TensorView& qsv, const TensorView& slv, const TensorView& g, const TensorView& o) {
    PagedAttentionArgs a{qv, KvCacheView{k, v, k_scale, v_scale}, b, qsv, slv, c.gate ? g : TensorView{}, o,
                         c.Hq, c.Hkv, c.D};
    if (c.hints) {
      a.max_query_len = max_q;
      a.max_seq_len = std::max(max_len, c.len_bound);
    }
    return a;
  };
  paged_attention(*cpu_, args(q.view(), kc.view(), vc.view(), bt.view(), qs.view(), sl.view(), gate.view(), out.view()));
  run_gpu_poisoned([&] {
    paged_attention(*gpu_, args(dq.view(), dkc.view(), dvc.view(), dbt.view(), dqs.view(), dsl.view(), dgate.view(),
                                dout.view()));
  }, {&dout});
  expect_close(std::string("paged_attention ") + c.name, dout, out, kTolAttention);
  if (max_q <= 1) return;
  // The same case on the warp MMAs, which GPUs without warpgroup MMAs take
  // for prefill (on those this repeats the launch above).
  cuda_allow_warpgroup_attention(*gpu_, false);
  run_gpu_poisoned([&] {
    paged_attention(*gpu_, args(dq.view(), dkc.view(), dvc.view(), dbt.view(), dqs.view(), dsl.view(), dgate.view(),
                                dout.view()));
  }, {&dout});
  cuda_allow_warpgroup_attention(*gpu_, true);
  expect_close(std::string("paged_attention ") + c.name + " (warp MMAs)", dout, out, kTolAttention);
}

class PagedAttentionTest : public PagedAttentionCheck, public ::testing::WithParamInterface<AttnCase> {};

TEST_P(PagedAttentionTest, MatchesCpu) { check(GetParam()); }

// Split-KV launches of different shapes back to back on one backend, merged
// inside clusters and through the counters in turn: each group's merge
// counter must be back at zero after every launch, or the next launch that
// uses it merges early (or never) and leaves poisoned output.
TEST_F(PagedAttentionCheck, SplitCountersResetBetweenLaunches) {
  const AttnCase b1{"counters 27b b1 ctx4000", 24, 4, 256, 16, {{1, 3999}}, true, true};
  const AttnCase b8{"counters 35b b8 mixed fp8", 16, 2, 256, 16,
                    {{1, 0}, {1, 700}, {1, 15}, {1, 2100}, {1, 64}, {1, 1}, {1, 1300}, {1, 33}}, true, true, true,
                    4096};
  const AttnCase chunk{"counters 27b two row tiles", 24, 4, 256, 16, {{12, 500}, {1, 30}}, true, true};
  // Bounds above the cluster merge's reach: these merge through the counters.
  const AttnCase long_b1{"counters 27b b1 ctx4000 bound16384", 24, 4, 256, 16, {{1, 3999}}, true, true, false, 16384};
  const AttnCase long_b8{"counters 35b b8 mixed bound8192", 16, 2, 256, 16,
                         {{1, 0}, {1, 700}, {1, 15}, {1, 5100}, {1, 64}, {1, 1}, {1, 1300}, {1, 33}}, true, true,
                         false, 8192};
  for (const AttnCase* c : {&b1, &long_b1, &b8, &chunk, &long_b8, &b1, &long_b1, &chunk, &long_b8, &b8}) {
    SCOPED_TRACE(c->name);
    check(*c);
  }
}

std::vector<std::pair<int64_t, int64_t>> decode_batch(int n, int64_t base) {
  std::vector<std::pair<int64_t, int64_t>> v;
  for (int i = 0; i < n; ++i) v.emplace_back(1, base + 37 * i);
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PagedAttentionTest,
    ::testing::Values(
        AttnCase{"prefill d32", 4, 2, 32, 16, {{45, 0}}, true, true},
        AttnCase{"prefill d64 mixed", 4, 2, 64, 16, {{70, 130}, {1, 33}, {0, 5}, {17, 0}}, true, false},
        AttnCase{"prefill d256 g6", 24, 4, 256, 16, {{200, 0}}, true, true},
        AttnCase{"chunked prefill d256", 24, 4, 256, 16, {{130, 900}, {1, 50}}, true, true},
        AttnCase{"decode d256 split", 24, 4, 256, 16, decode_batch(3, 1500), true, true},
        AttnCase{"decode d256 no hints", 24, 4, 256, 16, decode_batch(5, 300), true, false},
        AttnCase{"decode d128 g8", 16, 2, 128, 32, decode_batch(8, 700), false, true},
        AttnCase{"decode d32 g3 bs4", 6, 2, 32, 4, decode_batch(4, 90), true, true},
        AttnCase{"prefill d64 no gate", 2, 1, 64, 8, {{33, 20}, {64, 0}}, false, true},
        AttnCase{"fp8 prefill d32", 4, 2, 32, 16, {{45, 0}}, true, true, true},
        AttnCase{"fp8 prefill d64 mixed", 4, 2, 64, 16, {{70, 130}, {1, 33}, {0, 5}, {17, 0}}, true, false, true},
        AttnCase{"fp8 chunked prefill d256", 24, 4, 256, 16, {{130, 900}, {1, 50}}, true, true, true},
        AttnCase{"fp8 decode d256 split", 24, 4, 256, 16, decode_batch(3, 1500), true, true, true},
        AttnCase{"fp8 decode d128 g8", 16, 2, 128, 32, decode_batch(8, 700), false, true, true},
        // Decode at the 27B (24 / 4 heads) and 35B-A3B (16 / 2 heads) shapes:
        // batches 1, 8 and 32 at contexts 1, 130 and 4000, some with a
        // max_seq_len bound above the actual lengths as a decode graph has.
        AttnCase{"decode 27b b1 ctx1", 24, 4, 256, 16, decode_batch(1, 0), true, true},
        AttnCase{"decode 27b b1 ctx130 bound256", 24, 4, 256, 16, decode_batch(1, 129), true, true, false, 256},
        AttnCase{"decode 27b b1 ctx4000", 24, 4, 256, 16, decode_batch(1, 3999), true, true},
        AttnCase{"decode 27b b8 ctx130", 24, 4, 256, 16, decode_batch(8, 100), true, true, false, 512},
        AttnCase{"decode 27b b32 ctx20 to 1167", 24, 4, 256, 16, decode_batch(32, 20), true, true},
        AttnCase{"decode 35b b1 ctx1 bound64", 16, 2, 256, 16, decode_batch(1, 0), true, true, false, 64},
        AttnCase{"decode 35b b1 ctx130", 16, 2, 256, 16, decode_batch(1, 129), true, true},
        AttnCase{"decode 35b b1 ctx4000 bound8192", 16, 2, 256, 16, decode_batch(1, 3999), true, true, false, 8192},
        AttnCase{"decode 35b b8 ctx4000", 16, 2, 256, 16, decode_batch(8, 3900), true, true},
        AttnCase{"decode 35b b32 ctx20 to 1167 bound2048", 16, 2, 256, 16, decode_batch(32, 20), true, true, false,
                 2048},
        AttnCase{"fp8 decode 27b b1 ctx130 bound256", 24, 4, 256, 16, decode_batch(1, 129), true, true, true, 256},
        AttnCase{"fp8 decode 35b b8 ctx4000", 16, 2, 256, 16, decode_batch(8, 3900), true, true, true},
        AttnCase{"fp8 decode 35b b32 ctx1", 16, 2, 256, 16, decode_batch(32, 0), true, true, true},
        // One launch whose sequences fill different numbers of its splits
        // (from 1 to all), so the merge weighs empty splits in every group.
        AttnCase{"decode 27b mixed ctx bound4096", 24, 4, 256, 16, {{1, 0}, {1, 16}, {1, 129}, {1, 3999}}, true, true,
                 false, 4096},
        AttnCase{"fp8 decode 35b mixed ctx", 16, 2, 256, 16, {{1, 2047}, {1, 5}, {1, 300}, {1, 31}, {1, 1000}}, false,
                 true, true},
        // Split prefill chunks: row tiles of several tokens (each row seeing
        // its own causal key count), a second row tile that only the first
        // sequence fills, next to a decode row.
        AttnCase{"chunked prefill 27b split", 24, 4, 256, 16, {{12, 500}, {1, 30}}, true, true},
        AttnCase{"fp8 chunked prefill 35b split", 16, 2, 256, 16, {{3, 50}, {1, 1000}, {9, 0}}, true, true, true},
        // Long prefills at the model shapes: one 1024-token prompt (128 row
        // tiles per KV head, split in two), prompts with context, and two
        // prompts whose row tiles outnumber the resident blocks (no split).
        AttnCase{"prefill 35b 1024", 16, 2, 256, 16, {{1024, 0}}, true, true},
        AttnCase{"fp8 prefill 35b 300 ctx200", 16, 2, 256, 16, {{300, 200}}, true, true, true},
        AttnCase{"prefill 27b 384", 24, 4, 256, 16, {{384, 0}}, true, true},
        AttnCase{"fp8 prefill 27b 256 ctx700", 24, 4, 256, 16, {{256, 700}}, true, true, true},
        AttnCase{"prefill 27b two prompts", 24, 4, 256, 16, {{520, 0}, {400, 64}}, true, true},
        AttnCase{"prefill d128 g8 600 ctx100", 16, 2, 128, 16, {{600, 100}}, false, true}),
    [](const ::testing::TestParamInfo<AttnCase>& i) {
      std::string n = i.param.name;
      for (char& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace hyllm::test
