// One decode step of a synthetic model with the embedded default model's
// shapes (8 layers: 6 GDN + 2 attention, hidden 320, MLP 768, vocab 8192),
// composed from the ops alone with random weights: the op-level cost of a
// token, without the model code around it.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "tensor/host_buffer.h"

namespace hyllm {
namespace {

constexpr int64_t kH = 320, kI = 768, kV = 8192, kLayers = 8;
constexpr int64_t kHq = 4, kHkv = 2, kD = 64, kHk = 2, kHv = 4, kDk = 64, kDv = 64;
constexpr int64_t kConv = 2 * kHk * kDk + kHv * kDv, kBlock = 16;

HostBuffer rnd(Shape s, float sd, uint32_t seed) {
  HostBuffer b(DType::kBF16, s);
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, sd);
  for (int64_t i = 0; i < s.numel(); ++i) b.data_as<uint16_t>()[i] = f32_to_bf16(n(gen));
  return b;
}
HostBuffer ints(const std::vector<int32_t>& v) {
  HostBuffer b(DType::kI32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) b.data_as<int32_t>()[i] = v[i];
  return b;
}

struct Layer {
  bool attention;
  HostBuffer in_norm, post_norm, mix_in, mix_out, gate_up, down;
  HostBuffer conv_w, A_log, dt_bias, gdn_norm, ba, q_norm, k_norm;
};

void BM_DecodeStepDefaultShape(benchmark::State& st) {
  const int64_t B = st.range(0), ctx = st.range(1);
  auto be = make_cpu_backend();
  uint32_t seed = 1;
  std::vector<Layer> layers;
  for (int64_t l = 0; l < kLayers; ++l) {
    const bool attn = (l + 1) % 4 == 0;
    const int64_t mix_n = attn ? kHq * 2 * kD + 2 * kHkv * kD : kConv + kHv * kDv;
    const int64_t mix_k = attn ? kHq * kD : kHv * kDv;
    layers.push_back({attn, rnd({kH}, 0.1f, seed++), rnd({kH}, 0.1f, seed++), rnd({mix_n, kH}, 0.05f, seed++),
                      rnd({kH, mix_k}, 0.05f, seed++), rnd({2 * kI, kH}, 0.05f, seed++), rnd({kH, kI}, 0.05f, seed++),
                      rnd({kConv, 4}, 0.3f, seed++), rnd({kHv}, 0.5f, seed++), rnd({kHv}, 0.5f, seed++),
                      rnd({kDv}, 0.1f, seed++), rnd({2 * kHv, kH}, 0.05f, seed++), rnd({kD}, 0.1f, seed++),
                      rnd({kD}, 0.1f, seed++)});
  }
  HostBuffer embed = rnd({kV, kH}, 0.5f, seed++), final_norm = rnd({kH}, 0.1f, seed++);
  // Per-sequence state and a paged cache holding ctx tokens per sequence.
  const int64_t blocks_per_seq = (ctx + 1 + kBlock - 1) / kBlock;
  HostBuffer conv_state = rnd({B, 3, kConv}, 1.0f, seed++), ssm(DType::kF32, {B, kHv, kDv, kDk});
  HostBuffer kc = rnd({B * blocks_per_seq, kBlock, kHkv, kD}, 1.0f, seed++),
             vc = rnd({B * blocks_per_seq, kBlock, kHkv, kD}, 1.0f, seed++);
  std::vector<int32_t> qsl{0}, lens, pos, slots, idx, init, table, ids, rows;
  for (int64_t s = 0; s < B; ++s) {
    qsl.push_back(static_cast<int32_t>(s + 1));
    lens.push_back(static_cast<int32_t>(ctx + 1));
    pos.push_back(static_cast<int32_t>(ctx));
    slots.push_back(static_cast<int32_t>((s * blocks_per_seq + ctx / kBlock) * kBlock + ctx % kBlock));
    idx.push_back(static_cast<int32_t>(s));
    init.push_back(1);
    for (int64_t b = 0; b < blocks_per_seq; ++b) table.push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    ids.push_back(static_cast<int32_t>(s * 7 + 3));
    rows.push_back(static_cast<int32_t>(s));
  }
  HostBuffer qsl_t = ints(qsl), lens_t = ints(lens), pos_t = ints(pos), slots_t = ints(slots), idx_t = ints(idx),
             init_t = ints(init), ids_t = ints(ids), rows_t = ints(rows), table_t(DType::kI32, {B, blocks_per_seq});
  std::copy(table.begin(), table.end(), table_t.data_as<int32_t>());
  const KvCacheView cache{kc.view(), vc.view()};
  HostBuffer h(DType::kBF16, {B, kH}), resid(DType::kBF16, {B, kH}), x(DType::kBF16, {B, kH}),
      mix(DType::kBF16, {B, kConv + kHv * kDv}), ba(DType::kBF16, {B, 2 * kHv}), conv_out(DType::kBF16, {B, kConv}),
      core(DType::kBF16, {B, kHv * kDv}), normed(DType::kBF16, {B, kHv * kDv}), q(DType::kBF16, {B, kHq * kD}),
      gate(DType::kBF16, {B, kHq * kD}), attn(DType::kBF16, {B, kHq * kD}), gu(DType::kBF16, {B, 2 * kI}),
      act(DType::kBF16, {B, kI}), sel(DType::kBF16, {B, kH}), sel_r(DType::kBF16, {B, kH}),
      logits(DType::kF32, {B, kV});
  for (auto _ : st) {
    embedding(*be, {ids_t.view(), embed.view(), resid.view()});
    rms_norm(*be, {resid.view(), layers[0].in_norm.view(), x.view(), {}, {}, 1e-6f, true});
    for (int64_t l = 0; l < kLayers; ++l) {
      const Layer& L = layers[l];
      TensorView mixv = L.attention ? TensorView(mix.data(), DType::kBF16, {B, kHq * 2 * kD + 2 * kHkv * kD})
                                    : mix.view();
      linear(*be, {x.view(), LinearWeight::bf16(L.mix_in.view()), mixv});
      if (L.attention) {
        attention_prep(*be, {ColSlice(mixv, 0, kHq * 2 * kD), ColSlice(mixv, kHq * 2 * kD, kHkv * kD),
                             ColSlice(mixv, kHq * 2 * kD + kHkv * kD, kHkv * kD), L.q_norm.view(), L.k_norm.view(),
                             pos_t.view(), slots_t.view(), q.view(), gate.view(), cache, kHq, kHkv, kD, kD / 4,
                             1e7f, 1e-6f});
        paged_attention(*be, {q.view(), cache, table_t.view(), qsl_t.view(), lens_t.view(), gate.view(), attn.view(),
                              kHq, kHkv, kD, 0.0f, 1, ctx + 1});
        linear(*be, {attn.view(), LinearWeight::bf16(L.mix_out.view()), h.view()});
      } else {
        linear(*be, {x.view(), LinearWeight::bf16(L.ba.view()), ba.view()});
        gdn_conv(*be, {ColSlice(mix.view(), 0, kConv), L.conv_w.view(), conv_state.view(), qsl_t.view(), idx_t.view(),
                       init_t.view(), conv_out.view()});
        gated_delta_rule(*be, {conv_out.view(), ColSlice(ba.view(), kHv, kHv), ColSlice(ba.view(), 0, kHv),
                               L.A_log.view(), L.dt_bias.view(), ssm.view(), qsl_t.view(), idx_t.view(),
                               init_t.view(), core.view(), kHk, kHv, kDk, kDv, DeltaRuleAlgorithm::kRecurrent, 1});
        gated_rms_norm(*be, {core.view(), ColSlice(mix.view(), kConv, kHv * kDv), L.gdn_norm.view(), normed.view(),
                             kHv, kDv, 1e-6f});
        linear(*be, {normed.view(), LinearWeight::bf16(L.mix_out.view()), h.view()});
      }
      rms_norm(*be, {h.view(), L.post_norm.view(), x.view(), resid.view(), resid.view(), 1e-6f, true});
      linear(*be, {x.view(), LinearWeight::bf16(L.gate_up.view()), gu.view()});
      swiglu(*be, {gu.view(), act.view()});
      linear(*be, {act.view(), LinearWeight::bf16(L.down.view()), h.view()});
      const TensorView& next_norm = l + 1 < kLayers ? layers[l + 1].in_norm.view() : final_norm.view();
      if (l + 1 < kLayers) {
        rms_norm(*be, {h.view(), next_norm, x.view(), resid.view(), resid.view(), 1e-6f, true});
      }
    }
    gather_rows(*be, {h.view(), rows_t.view(), sel.view()});
    gather_rows(*be, {resid.view(), rows_t.view(), sel_r.view()});
    rms_norm(*be, {sel.view(), final_norm.view(), x.view(), sel_r.view(), {}, 1e-6f, true});
    linear(*be, {x.view(), LinearWeight::bf16(embed.view()), logits.view()});
  }
  st.SetItemsProcessed(st.iterations() * B);  // tokens
}
BENCHMARK(BM_DecodeStepDefaultShape)->Args({1, 64})->Args({1, 512})->Args({4, 256})->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace hyllm
