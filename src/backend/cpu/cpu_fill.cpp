// Random fill from the counter-based generator of util/counter_rng.h.
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_kernels.h"
#include "util/counter_rng.h"

namespace hyllm {

namespace {

template <typename T, typename Base, typename Convert>
void fill(T* dst, int64_t n, const FillRandomArgs& a, Base base, Convert convert) {
  cpu::parallel(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      dst[i] = convert(a.offset + a.scale * base(rng::mix(a.stream + static_cast<uint64_t>(i))));
  });
}

template <typename T, typename Convert>
void fill_dist(T* dst, int64_t n, const FillRandomArgs& a, Convert convert) {
  if (a.distribution == RandomDistribution::kNormal)
    fill(dst, n, a, [](uint64_t r) { return rng::normal(r); }, convert);
  else
    fill(dst, n, a, [](uint64_t r) { return rng::uniform01(r); }, convert);
}

}  // namespace

void CpuKernels::fill_random(const FillRandomArgs& a) {
  const int64_t n = a.dst.numel();
  if (a.dst.dtype() == DType::kF32)
    fill_dist(a.dst.data_as<float>(), n, a, [](float v) { return v; });
  else if (a.dst.dtype() == DType::kF8E4M3)
    fill_dist(a.dst.data_as<uint8_t>(), n, a, [](float v) { return f32_to_f8e4m3(v); });
  else
    fill_dist(a.dst.data_as<uint16_t>(), n, a, cpu::to_bf);
}

}  // namespace hyllm
