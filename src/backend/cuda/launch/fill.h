#pragma once
// Device-side random fill for dummy weights and benchmarks (see launch/dense.h
// for the conventions of these headers).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace hyllm::cuda {

// Uniform values in [mean - scale, mean + scale) from a counter-based hash of
// (seed, index): the same seed gives the same tensor on any GPU and launch.
void launch_fill_uniform(void* dst, bool f32, size_t n, uint64_t seed, float mean, float scale, cudaStream_t stream);

// ops.h's fill_random: dst[i] = type(offset + scale * base(mix(rng_stream + i))),
// base the normal (normal = true) or uniform generator of util/counter_rng.h,
// type's conversion that of tensor/float_conversions.h.
enum class FillType : uint8_t { kF32, kBF16, kE4M3 };
void launch_fill_random(void* dst, FillType type, size_t n, uint64_t rng_stream, bool normal, float offset,
                        float scale, cudaStream_t stream);

}  // namespace hyllm::cuda
