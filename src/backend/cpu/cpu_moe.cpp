// MoE routing (softmax, top-k, renormalise) and the whole MoE block: router,
// routed experts, the sigmoid-gated shared expert and the combine. Experts
// run one after another, each on the rows routed to it, with the parallel
// linear kernels; a token's expert outputs are added in ascending expert id.
#include <algorithm>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_fp8.h"
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

LinearWeight expert_weight(const LinearWeight& stacked, int64_t e) {
  return {stacked.format, expert_slice(stacked.weight, e), expert_slice(stacked.weight_scale, e),
          expert_slice(stacked.input_scale, e)};
}

// moe_route on T rows of E logits read through `logit(t, e)`.
template <typename Logit>
void route_rows(int64_t T, int64_t E, int64_t k, Logit&& logit, int32_t* ids, float* weights) {
  cpu::parallel(T, 16, [&](int64_t t0, int64_t t1) {
    std::vector<float> p(static_cast<size_t>(E));
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int64_t t = t0; t < t1; ++t) {
      float mx = -INFINITY;
      for (int64_t e = 0; e < E; ++e) {
        p[e] = logit(t, e);
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

// n rows of the MLP input: bf16 values, and their kGroup128 codes when the
// producer quantised them (block-FP8 projections read those).
struct MlpRows {
  const uint16_t* x = nullptr;  // [n, H]
  cpu::Fp8Rows xq;              // mode kNone when absent
};

// Rows `rows` of an Fp8Activation gathered into q [n, K] and scales [groups, n].
cpu::Fp8Rows gather_fp8(const Fp8Activation& a, const std::vector<int64_t>& rows, std::vector<uint8_t>& q,
                        std::vector<float>& scale) {
  const int64_t n = static_cast<int64_t>(rows.size()), K = a.cols(), T = a.rows();
  const int64_t groups = (K + kFp8BlockSize - 1) / kFp8BlockSize;
  q.resize(static_cast<size_t>(n * K));
  scale.resize(static_cast<size_t>(groups * n));
  const uint8_t* src = a.q.data_as<const uint8_t>();
  const float* s = a.scale.data_as<const float>();
  for (int64_t r = 0; r < n; ++r) {
    std::copy(src + rows[r] * K, src + (rows[r] + 1) * K, q.data() + r * K);
    for (int64_t j = 0; j < groups; ++j) scale[j * n + r] = s[j * T + rows[r]];
  }
  return {ActQuantMode::kGroup128, q.data(), scale.data(), n};
}

// out[n, H] = down(swiglu(gate_up(x))) for n rows, every projection rounded
// to bf16 as the linear and swiglu ops round (an FP8 down projection
// quantises the SwiGLU output as a producer would).
void swiglu_mlp(const LinearWeight& gate_up, const LinearWeight& down, const MlpRows& in, int64_t n,
                uint16_t* out) {
  const int64_t I = down.in_features();
  std::vector<uint16_t> gu(static_cast<size_t>(n * 2 * I)), hidden(static_cast<size_t>(n * I));
  if (gate_up.format == WeightFormat::kFp8Block && in.xq.mode != ActQuantMode::kNone) {
    cpu::linear_forward_fp8(gate_up, in.xq, n, gate_up.in_features(), gu.data(), DType::kBF16);
  } else {
    cpu::linear_forward(gate_up, in.x, n, gu.data(), DType::kBF16);
  }
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < I; ++i) {
      hidden[r * I + i] = cpu::to_bf(cpu::silu(cpu::bf(gu[r * 2 * I + i])) * cpu::bf(gu[r * 2 * I + I + i]));
    }
  }
  cpu::linear_forward(down, hidden.data(), n, out, DType::kBF16);
}

}  // namespace

void CpuKernels::moe_route(const MoeRouteArgs& a) {
  route_rows(
      a.logits.dim(0), a.logits.dim(1), a.top_k,
      [&](int64_t t, int64_t e) { return cpu::load_float(a.logits, t * a.logits.dim(1) + e); },
      a.topk_ids.data_as<int32_t>(), a.topk_weights.data_as<float>());
}

void CpuKernels::moe(const MoeArgs& a) {
  const int64_t T = a.x.dim(0), H = a.x.dim(1), E = a.router.dim(0), k = a.top_k;
  if (T == 0) return;
  const uint16_t* x = a.x.data_as<const uint16_t>();

  // Router logits, rounded to bf16 as the linear op rounds them.
  std::vector<uint16_t> logits(static_cast<size_t>(T * E));
  cpu::linear_forward(LinearWeight::bf16(a.router), x, T, logits.data(), DType::kBF16);
  std::vector<int32_t> ids(static_cast<size_t>(T * k));
  std::vector<float> tw(static_cast<size_t>(T * k));
  route_rows(
      T, E, k, [&](int64_t t, int64_t e) { return cpu::bf(logits[t * E + e]); }, ids.data(), tw.data());
  if (!a.topk_ids.empty()) std::copy(ids.begin(), ids.end(), a.topk_ids.data_as<int32_t>());
  if (!a.topk_weights.empty()) std::copy(tw.begin(), tw.end(), a.topk_weights.data_as<float>());

  // Rows routed to each expert, as (token, weight) pairs in token order.
  std::vector<std::vector<std::pair<int64_t, float>>> routed(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < k; ++i) routed[ids[t * k + i]].emplace_back(t, tw[t * k + i]);
  }
  if (!a.expert_load.empty()) {
    int32_t* load = a.expert_load.data_as<int32_t>();
    for (int64_t e = 0; e < E; ++e) load[e] += static_cast<int32_t>(routed[e].size());
  }
  // Experts in ascending id, so that each token's sum runs in that order.
  std::vector<float> acc(static_cast<size_t>(T * H), 0.0f);
  std::vector<uint16_t> xe, y;
  std::vector<uint8_t> qe;
  std::vector<float> se;
  std::vector<int64_t> tokens;
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = routed[e];
    const int64_t n = static_cast<int64_t>(rows.size());
    if (n == 0) continue;
    xe.resize(static_cast<size_t>(n * H));
    y.resize(static_cast<size_t>(n * H));
    tokens.clear();
    for (int64_t r = 0; r < n; ++r) {
      std::copy(x + rows[r].first * H, x + (rows[r].first + 1) * H, xe.data() + r * H);
      tokens.push_back(rows[r].first);
    }
    MlpRows in{xe.data(), {}};
    if (!a.xq.empty()) in.xq = gather_fp8(a.xq, tokens, qe, se);
    swiglu_mlp(expert_weight(a.experts.gate_up, e), expert_weight(a.experts.down, e), in, n, y.data());
    for (int64_t r = 0; r < n; ++r) {
      float* dst = acc.data() + rows[r].first * H;
      const float wt = rows[r].second;
      for (int64_t h = 0; h < H; ++h) dst[h] += wt * cpu::bf(y[r * H + h]);
    }
  }

  std::vector<uint16_t> shared, gate_logit;
  if (!a.shared.empty()) {
    shared.resize(static_cast<size_t>(T * H));
    MlpRows in{x, {}};
    if (!a.xq.empty()) in.xq = cpu::fp8_rows(a.xq);
    swiglu_mlp(a.shared.gate_up, a.shared.down, in, T, shared.data());
    if (!a.shared.gate.empty()) {
      gate_logit.resize(static_cast<size_t>(T));
      cpu::linear_forward(LinearWeight::bf16(a.shared.gate), x, T, gate_logit.data(), DType::kBF16);
    }
  }
  uint16_t* out = a.out.data_as<uint16_t>();
  cpu::parallel(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float g = gate_logit.empty() ? 1.0f : cpu::sigmoid(cpu::bf(gate_logit[t]));
      for (int64_t h = 0; h < H; ++h) {
        float v = acc[t * H + h];
        if (!shared.empty()) v += g * cpu::bf(shared[t * H + h]);
        out[t * H + h] = cpu::to_bf(v);
      }
    }
  });
}

}  // namespace hyllm
