#include "model/loader/dummy_weights.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "util/counter_rng.h"
#include "util/hash.h"
#include "util/thread_pool.h"

namespace hyllm {

namespace {

using rng::mix;
using rng::normal;
using rng::uniform01;

enum class Fill {
  kNormal002, kNearZero, kNearOne, kALog, kDtBias, kConv, kFp8Codes, kBlockScale, kTensorScale, kInputScale, kKvScale
};

Fill fill_for(const TensorSpec& s) {
  const std::string& n = s.name;
  switch (s.role) {
    case TensorRole::kBlockScale: return Fill::kBlockScale;
    case TensorRole::kWeightScale: return Fill::kTensorScale;
    case TensorRole::kInputScale: return Fill::kInputScale;
    case TensorRole::kKvScale: return Fill::kKvScale;
    case TensorRole::kLinearWeight: return s.dtype == DType::kF8E4M3 ? Fill::kFp8Codes : Fill::kNormal002;
    case TensorRole::kParameter: break;
  }
  if (n.ends_with("linear_attn.norm.weight")) return Fill::kNearOne;
  if (n.ends_with("norm.weight") || n.starts_with("mtp.pre_fc_norm_"))
    return Fill::kNearZero;  // (1+w) norms: layernorms, q/k norm, final norm, the MTP norms
  if (n.ends_with("A_log")) return Fill::kALog;
  if (n.ends_with("dt_bias")) return Fill::kDtBias;
  if (n.ends_with("conv1d.weight")) return Fill::kConv;
  return Fill::kNormal002;
}

constexpr float kFp8CodeStd = 112.0f;  // 448 / 4: rng::normal is bounded by 3.46, so codes stay within +-388
constexpr float kFp8WeightScale = 0.02f / kFp8CodeStd;
constexpr float kFp8InputScale = 0.1f;  // static activation range +-44.8
constexpr float kKvScale = 0.05f;

// Every fill but A_log is affine in one base variate: offset + scale * base
// (GeneratedFill), which is what fill_random computes on a device, so both
// give the same bytes. Per-tensor FP8 scales are constants (scale 0): the
// parts of a merged projection then share them, and merging them needs no
// re-quantisation on either path.
std::optional<GeneratedFill> recipe(Fill fill, uint64_t stream) {
  auto normal_fill = [&](float offset, float scale) { return GeneratedFill{stream, true, offset, scale}; };
  auto uniform_fill = [&](float offset, float scale) { return GeneratedFill{stream, false, offset, scale}; };
  switch (fill) {
    case Fill::kNormal002:
    case Fill::kNearZero: return normal_fill(0.0f, 0.02f);
    case Fill::kNearOne: return normal_fill(1.0f, 0.02f);
    case Fill::kDtBias: return uniform_fill(-0.1f, 0.2f);
    case Fill::kConv: return uniform_fill(-0.5f, 1.0f);
    case Fill::kFp8Codes: return normal_fill(0.0f, kFp8CodeStd);
    case Fill::kBlockScale: return uniform_fill(0.9f * kFp8WeightScale, 0.2f * kFp8WeightScale);
    case Fill::kTensorScale: return uniform_fill(kFp8WeightScale, 0.0f);
    case Fill::kInputScale: return uniform_fill(kFp8InputScale, 0.0f);
    case Fill::kKvScale: return uniform_fill(kKvScale, 0.0f);
    case Fill::kALog: return std::nullopt;
  }
  return std::nullopt;
}

// Fills dst[begin, end) with convert(value(random bits of element i)); the
// fill kind and dtype are dispatched once per range, not per element.
template <typename T, typename Convert>
void fill_typed(T* dst, int64_t begin, int64_t end, uint64_t stream, Fill fill, Convert convert) {
  auto run = [&](auto value) {
    for (int64_t i = begin; i < end; ++i) dst[i] = convert(value(mix(stream + static_cast<uint64_t>(i))));
  };
  const std::optional<GeneratedFill> r = recipe(fill, stream);
  if (!r) return run([](uint64_t bits) { return std::log(1.0f + 15.0f * uniform01(bits)); });  // A_log
  const float offset = r->offset, scale = r->scale;
  if (r->normal) return run([=](uint64_t bits) { return offset + scale * normal(bits); });
  return run([=](uint64_t bits) { return offset + scale * uniform01(bits); });
}

void fill_range(DType t, void* dst, int64_t begin, int64_t end, uint64_t stream, Fill fill) {
  switch (t) {
    case DType::kF32: return fill_typed(static_cast<float*>(dst), begin, end, stream, fill, [](float v) { return v; });
    case DType::kBF16: return fill_typed(static_cast<uint16_t*>(dst), begin, end, stream, fill, f32_to_bf16);
    case DType::kF16: return fill_typed(static_cast<uint16_t*>(dst), begin, end, stream, fill, f32_to_f16);
    case DType::kF8E4M3: return fill_typed(static_cast<uint8_t*>(dst), begin, end, stream, fill, f32_to_f8e4m3);
    default: HYLLM_CHECK(false, "dummy weights cannot make {}", dtype_name(t));
  }
}

bool is_router(const std::string& name) { return name.ends_with("mlp.gate.weight"); }

}  // namespace

std::vector<float> dummy_router_row_scales(int64_t E, float skew, uint64_t stream) {
  std::vector<float> scale(static_cast<size_t>(E), 1.0f);
  if (skew <= 0.0f || E == 0) return scale;
  // Rank of each expert: a Fisher-Yates shuffle driven by the stream.
  std::vector<int64_t> rank(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) rank[e] = e;
  for (int64_t i = E - 1; i > 0; --i) std::swap(rank[i], rank[mix(stream + static_cast<uint64_t>(i)) % (i + 1)]);
  double sum_sq = 0.0;
  for (int64_t e = 0; e < E; ++e) {
    scale[e] = std::pow(static_cast<float>(rank[e] + 1), -skew);
    sum_sq += static_cast<double>(scale[e]) * scale[e];
  }
  const float norm = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(E)));
  for (float& v : scale) v *= norm;
  return scale;
}

DummyWeights::DummyWeights(const ModelConfig& config, uint64_t seed, float router_skew)
    : DummyWeights(config, seed, default_expert_layout(config), router_skew) {}

DummyWeights::DummyWeights(const ModelConfig& config, uint64_t seed, ExpertLayout experts, float router_skew)
    : specs_(qwen35_expected_tensors(config, experts)), seed_(seed), router_skew_(router_skew) {
  tensors_.reserve(specs_.size());
  for (const TensorSpec& s : specs_) {
    tensors_.push_back({s.name, s.dtype, s.shape, static_cast<size_t>(s.shape.numel()) * dtype_size(s.dtype), "dummy"});
  }
  index_tensors();
}

void DummyWeights::read(const std::string& name, void* host_dst) const {
  const TensorInfo& t = info(name);
  const TensorSpec& spec = specs_[static_cast<size_t>(&t - tensors_.data())];
  const Fill fill = fill_for(spec);
  const uint64_t stream = mix(seed_ ^ hash64(name));
  const DType dtype = t.dtype;
  auto generate = [&](int64_t begin, int64_t end) { fill_range(dtype, host_dst, begin, end, stream, fill); };
  const int64_t n = t.shape.numel();
  constexpr int64_t kParallelFrom = 1 << 20;
  if (n < kParallelFrom) generate(0, n);
  else ThreadPool::global().parallel_for(0, n, generate, 1 << 16);
  if (router_skew_ > 0.0f && is_router(name) && t.shape.rank() == 2 && dtype == DType::kBF16) {
    const int64_t E = t.shape[0], H = t.shape[1];
    const auto scale = dummy_router_row_scales(E, router_skew_, mix(stream ^ 0x5eedull));
    auto* w = static_cast<uint16_t*>(host_dst);
    for (int64_t i = 0; i < E * H; ++i) w[i] = f32_to_bf16(bf16_to_f32(w[i]) * scale[i / H]);
  }
}

std::optional<GeneratedFill> DummyWeights::generated(const std::string& name) const {
  const TensorInfo& t = info(name);
  if (t.dtype != DType::kBF16 && t.dtype != DType::kF32 && t.dtype != DType::kF8E4M3) return std::nullopt;
  if (router_skew_ > 0.0f && is_router(name)) return std::nullopt;  // scaled rows: made by read()
  const TensorSpec& spec = specs_[static_cast<size_t>(&t - tensors_.data())];
  return recipe(fill_for(spec), mix(seed_ ^ hash64(name)));
}

std::string DummyWeights::describe() const {
  if (router_skew_ > 0.0f) return fmt::format("dummy weights (seed {}, router skew {})", seed_, router_skew_);
  return fmt::format("dummy weights (seed {})", seed_);
}

}  // namespace hyllm
