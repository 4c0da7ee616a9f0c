// MoE routing (softmax, top-k, renormalise) and the routed experts with the
// optional sigmoid-gated shared expert. Experts run one after another, each on
// the rows routed to it, with the parallel linear kernels.
#include <algorithm>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {
namespace {

// Sub-tensor e of a tensor with a leading expert dimension.
TensorView expert_slice(const TensorView& t, int64_t e) {
  if (t.empty()) return t;
  Shape s;
  if (t.rank() == 1) {
    s = Shape{1};
  } else {
    s = Shape::from(t.shape().begin() + 1, t.shape().end());
  }
  const size_t bytes = static_cast<size_t>(s.numel()) * dtype_size(t.dtype());
  return {static_cast<char*>(t.data()) + static_cast<size_t>(e) * bytes, t.dtype(), s, t.device()};
}

LinearWeight expert_weight(const LinearWeight& fused, int64_t e) {
  return {fused.format, expert_slice(fused.weight, e), expert_slice(fused.weight_scale, e),
          expert_slice(fused.input_scale, e)};
}

}  // namespace

void CpuKernels::moe_route(const MoeRouteArgs& a) {
  const int64_t T = a.logits.dim(0), E = a.logits.dim(1), k = a.top_k;
  int32_t* ids = a.topk_ids.data_as<int32_t>();
  float* weights = a.topk_weights.data_as<float>();
  cpu::parallel(T, 16, [&](int64_t t0, int64_t t1) {
    std::vector<float> p(static_cast<size_t>(E));
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int64_t t = t0; t < t1; ++t) {
      float mx = -INFINITY;
      for (int64_t e = 0; e < E; ++e) {
        p[e] = cpu::load_float(a.logits, t * E + e);
        mx = std::max(mx, p[e]);
      }
      float sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) {
        p[e] = std::exp(p[e] - mx);
        sum += p[e];
      }
      for (int64_t e = 0; e < E; ++e) p[e] /= sum;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t x, int32_t y) { return p[x] > p[y] || (p[x] == p[y] && x < y); });
      float top_sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) top_sum += p[order[i]];
      for (int64_t i = 0; i < k; ++i) {
        ids[t * k + i] = order[i];
        weights[t * k + i] = p[order[i]] / top_sum;
      }
    }
  });
}

void CpuKernels::moe_experts(const MoeExpertsArgs& a) {
  const int64_t T = a.x.dim(0), H = a.x.dim(1), k = a.topk_ids.dim(1);
  const MoeExpertWeights& w = a.experts;
  const int64_t E = w.num_experts();
  const int64_t I = w.fused() ? w.gate_up.weight.dim(1) / 2 : w.expert_gate[0].out_features();
  const int32_t* ids = a.topk_ids.data_as<const int32_t>();
  const float* tw = a.topk_weights.data_as<const float>();
  // Rows routed to each expert, as (token, weight) pairs.
  std::vector<std::vector<std::pair<int64_t, float>>> routed(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < k; ++i) {
      const int32_t e = ids[t * k + i];
      if (e < 0 || e >= E) {
        fail(ErrorCode::kInvalidArgument, "moe_experts: expert id {} of token {} is outside [0, {})", e, t, E);
      }
      routed[e].emplace_back(t, tw[t * k + i]);
    }
  }
  std::vector<float> acc(static_cast<size_t>(T * H), 0.0f);
  const uint16_t* x = a.x.data_as<const uint16_t>();
  std::vector<uint16_t> xe, gu, hidden, down, up;
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = routed[e];
    const int64_t n = static_cast<int64_t>(rows.size());
    if (n == 0) continue;
    xe.resize(static_cast<size_t>(n * H));
    for (int64_t r = 0; r < n; ++r) std::copy(x + rows[r].first * H, x + (rows[r].first + 1) * H, xe.data() + r * H);
    gu.resize(static_cast<size_t>(n * 2 * I));
    hidden.resize(static_cast<size_t>(n * I));
    if (w.fused()) {
      cpu::linear_forward(expert_weight(w.gate_up, e), xe.data(), n, gu.data(), DType::kBF16);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t i = 0; i < I; ++i) {
          hidden[r * I + i] = cpu::to_bf(cpu::silu(cpu::bf(gu[r * 2 * I + i])) * cpu::bf(gu[r * 2 * I + I + i]));
        }
      }
    } else {
      up.resize(static_cast<size_t>(n * I));
      cpu::linear_forward(w.expert_gate[e], xe.data(), n, gu.data(), DType::kBF16);
      cpu::linear_forward(w.expert_up[e], xe.data(), n, up.data(), DType::kBF16);
      for (int64_t i = 0; i < n * I; ++i) hidden[i] = cpu::to_bf(cpu::silu(cpu::bf(gu[i])) * cpu::bf(up[i]));
    }
    down.resize(static_cast<size_t>(n * H));
    cpu::linear_forward(w.fused() ? expert_weight(w.down, e) : w.expert_down[e], hidden.data(), n, down.data(),
                        DType::kBF16);
    for (int64_t r = 0; r < n; ++r) {
      float* dst = acc.data() + rows[r].first * H;
      const float wt = rows[r].second;
      for (int64_t h = 0; h < H; ++h) dst[h] += wt * cpu::bf(down[r * H + h]);
    }
  }
  uint16_t* out = a.out.data_as<uint16_t>();
  const uint16_t* shared = a.shared.empty() ? nullptr : a.shared.data_as<const uint16_t>();
  cpu::parallel(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float g = shared && !a.shared_gate.empty() ? cpu::sigmoid(cpu::load_float(a.shared_gate, t)) : 1.0f;
      for (int64_t h = 0; h < H; ++h) {
        float v = acc[t * H + h];
        if (shared) v += g * cpu::bf(shared[t * H + h]);
        out[t * H + h] = cpu::to_bf(v);
      }
    }
  });
}

}  // namespace hyllm
