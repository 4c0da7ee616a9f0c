#pragma once
// Random weights and inputs of one MoE block (ops.h moe) in any expert
// format, shared by the CPU op tests and the CUDA op harness. Inputs and the
// router can be drawn on a coarse grid so that every router dot product is
// exact in fp32 whatever the summation order: two backends then round the
// same logits and route every token identically.

#include <functional>
#include <string>

#include "ops_test_util.h"
#include "util/counter_rng.h"
#include "util/thread_pool.h"

namespace hyllm::test {

struct MoeShape {
  int64_t E = 8, k = 2, H = 64, I = 32, Is = 32;
  WeightFormat format = WeightFormat::kBf16;  // routed and shared experts
  bool shared = true, gated = true;
  // Tokens prefer experts [0, top_k): each of them gets every token.
  bool hot_experts = false;
};

struct MoeTensors {
  MoeShape s;
  HostTensor router;                 // [E (+1 gate row), H] bf16
  HostTensor gu, gu_scale, gu_in;    // experts gate_up [E, 2I, H] and its scales
  HostTensor dn, dn_scale, dn_in;    // experts down [E, H, I]
  HostTensor sgu, sgu_scale, sgu_in; // shared gate_up [2Is, H]
  HostTensor sdn, sdn_scale, sdn_in; // shared down [H, Is]

  static int64_t blocks(int64_t n) { return (n + kFp8BlockSize - 1) / kFp8BlockSize; }

  // Fills n elements of a large weight in parallel from a counter-based
  // generator seeded by rng: value(u) of a unit normal u.
  template <typename T, typename F>
  static void fill_fast(T* dst, int64_t n, Rng& rng, F value) {
    const uint64_t stream = rng.gen()() * 0x9e3779b97f4a7c15ull + rng.gen()();
    ThreadPool::global().parallel_for(
        0, n,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) dst[i] = value(rng::normal(rng::mix(stream + static_cast<uint64_t>(i))));
        },
        1 << 16);
  }

  // One projection stack [lead..., N, K] in the shape's format (weights
  // without the double copy: tests read them only through the buffers).
  void make(Rng& rng, std::vector<int64_t> lead, int64_t N, int64_t K, HostTensor& w, HostTensor& scale,
            HostTensor& in) {
    std::vector<int64_t> wd = lead, sd = lead;
    wd.push_back(N);
    wd.push_back(K);
    const Shape wshape = Shape::from(wd.begin(), wd.end());
    const float std_bf16 = 1.0f / std::sqrt(static_cast<float>(K));
    if (s.format == WeightFormat::kBf16) {
      w = HostTensor::buffer_only(DType::kBF16, wshape);
      fill_fast(w.buf.data_as<uint16_t>(), w.numel(), rng, [&](float u) { return f32_to_bf16(std_bf16 * u); });
      return;
    }
    w = HostTensor::buffer_only(DType::kF8E4M3, wshape);
    fill_fast(w.buf.data_as<uint8_t>(), w.numel(), rng,
              [](float u) { return f32_to_f8e4m3(std::clamp(64.0f * u, -448.0f, 448.0f)); });
    if (s.format == WeightFormat::kFp8Block) {
      sd.push_back(blocks(N));
      sd.push_back(blocks(K));
      scale = f32_tensor(Shape::from(sd.begin(), sd.end()));
      scale.fill_uniform(rng, 0.5 * std_bf16 / 64.0, 1.5 * std_bf16 / 64.0);
      return;
    }
    const Shape one = lead.empty() ? Shape{1} : Shape::from(lead.begin(), lead.end());
    scale = f32_tensor(one);
    scale.fill_uniform(rng, 0.5 * std_bf16 / 64.0, 1.5 * std_bf16 / 64.0);
    in = f32_tensor(one);
    in.fill_uniform(rng, 0.02, 0.04);
  }

  MoeTensors(const MoeShape& shape, Rng& rng) : s(shape) {
    router = bf16_tensor({s.E + (s.shared && s.gated ? 1 : 0), s.H});
    // Multiples of 1/64 up to +-1/4: with inputs from input(), every product
    // and partial sum is a multiple of 2^-8 below 2^15 in magnitude: exact.
    for (int64_t i = 0; i < router.numel(); ++i) {
      const int64_t e = i / s.H;
      double v = std::clamp(std::round(rng.normal(4.0)), -16.0, 16.0) / 64.0;
      if (s.hot_experts && e < s.k) v = std::abs(v) + 0.25;
      router.set(i, v);
    }
    make(rng, {s.E}, 2 * s.I, s.H, gu, gu_scale, gu_in);
    make(rng, {s.E}, s.H, s.I, dn, dn_scale, dn_in);
    if (s.shared) {
      make(rng, {}, 2 * s.Is, s.H, sgu, sgu_scale, sgu_in);
      make(rng, {}, s.H, s.Is, sdn, sdn_scale, sdn_in);
    }
  }

  // x [T, H] on the same grid: multiples of 1/4 in [-4, 4] (positive and
  // biased with hot_experts, so that those experts win every token).
  HostTensor input(Rng& rng, int64_t T) const {
    HostTensor x = bf16_tensor({T, s.H});
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = std::clamp(std::round(rng.normal(4.0)), -16.0, 16.0) / 4.0;
      if (s.hot_experts) v = std::abs(v) + 0.5;
      x.set(i, v);
    }
    return x;
  }

  // The op's arguments with every tensor mapped by `view` (host views, or
  // the views of device copies).
  MoeArgs args(const std::function<TensorView(const HostTensor&)>& view, const TensorView& x,
               const TensorView& out) const {
    auto weight = [&](const HostTensor& w, const HostTensor& sc, const HostTensor& in) {
      switch (s.format) {
        case WeightFormat::kBf16: return LinearWeight::bf16(view(w));
        case WeightFormat::kFp8Block: return LinearWeight::fp8_block(view(w), view(sc));
        case WeightFormat::kFp8Tensor: return LinearWeight::fp8_tensor(view(w), view(sc), view(in));
      }
      return LinearWeight{};
    };
    MoeArgs a;
    a.x = x;
    const TensorView r = view(router);
    a.router = r.slice_rows(0, s.E);
    a.top_k = s.k;
    a.experts = {weight(gu, gu_scale, gu_in), weight(dn, dn_scale, dn_in)};
    if (s.shared) {
      a.shared.gate_up = weight(sgu, sgu_scale, sgu_in);
      a.shared.down = weight(sdn, sdn_scale, sdn_in);
      if (s.gated) a.shared.gate = r.slice_rows(s.E, s.E + 1);
    }
    a.out = out;
    return a;
  }
};

}  // namespace hyllm::test
