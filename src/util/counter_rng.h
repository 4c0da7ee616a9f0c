#pragma once
// The counter-based generator of dummy weights: element i of a tensor is a
// pure function of (stream, i), so any order, thread count or device gives the
// same bytes. The CPU backend's fill_random and the host dummy-weight source
// share these functions. The CUDA backend's fill kernel shares mix and
// restates the float ones with explicit roundings (no contracted multiply-add);
// the samplers on both sides draw their seeded uniforms from mix too.

#include <cstdint>

#include "util/host_device.h"

namespace hyllm::rng {

// splitmix64's finaliser of x + golden ratio.
HYLLM_HD uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// [0, 1) from the top 24 bits.
inline float uniform01(uint64_t bits) { return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f); }

// Irwin-Hall of four 16-bit uniforms, scaled to unit variance: bell-shaped,
// bounded by +-3.46 (no outliers), and cheap.
inline float normal(uint64_t bits) {
  float s = 0;
  for (int k = 0; k < 4; ++k) s += static_cast<float>((bits >> (16 * k)) & 0xffff) * (1.0f / 65536.0f);
  return (s - 2.0f) * 1.7320508f;
}

}  // namespace hyllm::rng
