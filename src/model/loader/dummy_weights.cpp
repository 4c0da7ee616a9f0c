#include "model/loader/dummy_weights.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "util/counter_rng.h"
#include "util/hash.h"
#include "util/thread_pool.h"

namespace hyllm {

namespace {

using rng::mix;
using rng::normal;
using rng::uniform01;

enum class Fill { kNormal002, kNearZero, kNearOne, kALog, kDtBias, kConv, kFp8Codes, kWeightScale, kInputScale, kKvScale };

Fill fill_for(const TensorSpec& s) {
  const std::string& n = s.name;
  switch (s.role) {
    case TensorRole::kBlockScale:
    case TensorRole::kWeightScale: return Fill::kWeightScale;
    case TensorRole::kInputScale: return Fill::kInputScale;
    case TensorRole::kKvScale: return Fill::kKvScale;
    case TensorRole::kLinearWeight: return s.dtype == DType::kF8E4M3 ? Fill::kFp8Codes : Fill::kNormal002;
    case TensorRole::kParameter: break;
  }
  if (n.ends_with("linear_attn.norm.weight")) return Fill::kNearOne;
  if (n.ends_with("norm.weight")) return Fill::kNearZero;  // (1+w) norms: layernorms, q/k norm, final norm
  if (n.ends_with("A_log")) return Fill::kALog;
  if (n.ends_with("dt_bias")) return Fill::kDtBias;
  if (n.ends_with("conv1d.weight")) return Fill::kConv;
  return Fill::kNormal002;
}

constexpr float kFp8CodeStd = 112.0f;  // 448 / 4: clipping only past 4 sigma
constexpr float kFp8WeightScale = 0.02f / kFp8CodeStd;

// Fills dst[begin, end) with convert(value(random bits of element i)); the
// fill kind and dtype are dispatched once per range, not per element.
template <typename T, typename Convert>
void fill_typed(T* dst, int64_t begin, int64_t end, uint64_t stream, Fill fill, Convert convert) {
  auto run = [&](auto value) {
    for (int64_t i = begin; i < end; ++i) dst[i] = convert(value(mix(stream + static_cast<uint64_t>(i))));
  };
  switch (fill) {
    case Fill::kNormal002:
    case Fill::kNearZero: return run([](uint64_t r) { return 0.02f * normal(r); });
    case Fill::kNearOne: return run([](uint64_t r) { return 1.0f + 0.02f * normal(r); });
    case Fill::kALog: return run([](uint64_t r) { return std::log(1.0f + 15.0f * uniform01(r)); });
    case Fill::kDtBias: return run([](uint64_t r) { return 0.2f * uniform01(r) - 0.1f; });
    case Fill::kConv: return run([](uint64_t r) { return uniform01(r) - 0.5f; });
    case Fill::kFp8Codes: return run([](uint64_t r) { return kFp8CodeStd * normal(r); });
    case Fill::kWeightScale: return run([](uint64_t r) { return kFp8WeightScale * (0.9f + 0.2f * uniform01(r)); });
    case Fill::kInputScale: return run([](uint64_t r) { return 0.03f * (0.9f + 0.2f * uniform01(r)); });
    case Fill::kKvScale: return run([](uint64_t r) { return 0.05f * (0.9f + 0.2f * uniform01(r)); });
  }
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

}  // namespace

DummyWeights::DummyWeights(const ModelConfig& config, uint64_t seed)
    : DummyWeights(config, seed, default_expert_layout(config)) {}

DummyWeights::DummyWeights(const ModelConfig& config, uint64_t seed, ExpertLayout experts)
    : specs_(qwen35_expected_tensors(config, experts)), seed_(seed) {
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
}

std::optional<GeneratedFill> DummyWeights::generated(const std::string& name) const {
  const TensorInfo& t = info(name);
  if (t.dtype != DType::kBF16 && t.dtype != DType::kF32) return std::nullopt;
  const TensorSpec& spec = specs_[static_cast<size_t>(&t - tensors_.data())];
  const uint64_t stream = mix(seed_ ^ hash64(name));
  // The same values as fill_typed's: offset + scale * base is what each
  // lambda there computes (x - c == -c + x and 1 * u == u exactly).
  switch (fill_for(spec)) {
    case Fill::kNormal002:
    case Fill::kNearZero: return GeneratedFill{stream, true, 0.0f, 0.02f};
    case Fill::kNearOne: return GeneratedFill{stream, true, 1.0f, 0.02f};
    case Fill::kDtBias: return GeneratedFill{stream, false, -0.1f, 0.2f};
    case Fill::kConv: return GeneratedFill{stream, false, -0.5f, 1.0f};
    default: return std::nullopt;
  }
}

std::string DummyWeights::describe() const { return fmt::format("dummy weights (seed {})", seed_); }

}  // namespace hyllm
