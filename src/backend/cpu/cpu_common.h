#pragma once
// Helpers shared by the CPU kernels: element access, row conversion and the
// thread pool. Kernels compute in fp32 and round to bf16 once per output.

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace hyllm::cpu {

inline ThreadPool& pool() { return ThreadPool::global(); }

// Runs fn(begin, end) over [0, n) on the pool, in chunks of at least min_chunk.
template <typename Fn>
void parallel(int64_t n, int64_t min_chunk, Fn&& fn) {
  if (n <= 0) return;
  pool().parallel_for(0, n, fn, min_chunk);
}

inline float bf(uint16_t h) { return bf16_to_f32(h); }
inline uint16_t to_bf(float f) { return f32_to_bf16(f); }

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus with beta 1 and threshold 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Element i of a float-typed vector stored as f32 or bf16.
inline float load_float(const TensorView& t, int64_t i) {
  return t.dtype() == DType::kF32 ? t.data_as<const float>()[i] : bf(t.data_as<const uint16_t>()[i]);
}
// The whole f32/bf16 vector as floats.
inline std::vector<float> to_floats(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = load_float(t, i);
  return v;
}

// Row r of a column slice of bf16 data.
inline const uint16_t* row(const ColSlice& s, int64_t r) {
  return s.tensor.data_as<const uint16_t>() + r * s.stride() + s.offset;
}

// bf16 -> f32 for n elements (vectorised where the CPU allows).
void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
// f32 -> bf16, round to nearest even, for n elements.
void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace hyllm::cpu
