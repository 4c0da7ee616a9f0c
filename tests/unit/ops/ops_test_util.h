#pragma once
// Helpers of the op tests: host tensors filled with fresh random values,
// outputs poisoned with NaN, and error measures. References are written in
// the tests in double precision from the values the kernels actually see
// (bf16-rounded inputs).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "tensor/host_buffer.h"

namespace hyllm::test {

// A fresh seed per test run, reported on failure through SCOPED_TRACE.
// HYLLM_TEST_SEED=<seed> replays a reported failure: every call returns it
// (run the one test that reported it, with --gtest_filter).
inline uint32_t fresh_seed() {
  if (const char* replay = std::getenv("HYLLM_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(replay, nullptr, 10));
  static std::random_device rd;
  return rd();
}

class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  double normal(double sd = 1.0) { return std::normal_distribution<double>(0.0, sd)(gen_); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
  std::mt19937& gen() { return gen_; }

 private:
  std::mt19937 gen_;
};

// A host tensor plus a double copy of its (exactly representable) values.
struct HostTensor {
  HostBuffer buf;
  std::vector<double> v;  // for float dtypes: the stored values
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape) : buf(dtype, shape), v(static_cast<size_t>(shape.numel()), 0.0) {}
  // Without the double copy: for large inputs a test fills through buf and
  // reads back only through get() / values().
  static HostTensor buffer_only(DType dtype, Shape shape) {
    HostTensor t;
    t.buf = HostBuffer(dtype, shape);
    return t;
  }
  TensorView view() const { return buf.view(); }
  DType dtype() const { return buf.view().dtype(); }
  int64_t numel() const { return buf.view().numel(); }

  // Stores value i (rounded to the dtype) and keeps the rounded value.
  void set(int64_t i, double x) {
    switch (dtype()) {
      case DType::kBF16: {
        uint16_t h = f32_to_bf16(static_cast<float>(x));
        buf.data_as<uint16_t>()[i] = h;
        v[i] = bf16_to_f32(h);
        break;
      }
      case DType::kF32:
        buf.data_as<float>()[i] = static_cast<float>(x);
        v[i] = static_cast<float>(x);
        break;
      case DType::kF8E4M3: {
        // Saturate as quantisers do: beyond 464 the conversion gives NaN.
        uint8_t q = f32_to_f8e4m3(static_cast<float>(std::clamp(x, -448.0, 448.0)));
        buf.data_as<uint8_t>()[i] = q;
        v[i] = f8e4m3_to_f32(q);
        break;
      }
      case DType::kI32:
        buf.data_as<int32_t>()[i] = static_cast<int32_t>(x);
        v[i] = static_cast<int32_t>(x);
        break;
      default:
        FAIL() << "unsupported test dtype";
    }
  }
  // Reads element i back from the buffer (after a kernel wrote it).
  double get(int64_t i) const {
    switch (dtype()) {
      case DType::kBF16: return bf16_to_f32(buf.data_as<uint16_t>()[i]);
      case DType::kF32: return buf.data_as<float>()[i];
      case DType::kF8E4M3: return f8e4m3_to_f32(buf.data_as<uint8_t>()[i]);
      case DType::kI32: return buf.data_as<int32_t>()[i];
      default: return NAN;
    }
  }
  std::vector<double> values() const {
    std::vector<double> r(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) r[i] = get(i);
    return r;
  }
  void fill_normal(Rng& rng, double sd = 1.0, double mean = 0.0) {
    for (int64_t i = 0; i < numel(); ++i) set(i, mean + rng.normal(sd));
  }
  void fill_uniform(Rng& rng, double lo, double hi) {
    for (int64_t i = 0; i < numel(); ++i) set(i, rng.uniform(lo, hi));
  }
  void fill_ints(const std::vector<int64_t>& xs) {
    for (size_t i = 0; i < xs.size(); ++i) set(static_cast<int64_t>(i), static_cast<double>(xs[i]));
  }
  // All bytes 0xff: NaN in bf16, f32 and e4m3, -1 in i32.
  void poison() { std::memset(buf.data(), 0xff, buf.size()); }
};

inline HostTensor bf16_tensor(Shape s) { return HostTensor(DType::kBF16, s); }
inline HostTensor f32_tensor(Shape s) { return HostTensor(DType::kF32, s); }
inline HostTensor i32_tensor(const std::vector<int64_t>& xs) {
  HostTensor t(DType::kI32, {static_cast<int64_t>(xs.size())});
  t.fill_ints(xs);
  return t;
}

// max |got - want| / max(max |want|, floor): one number per op, compared
// against a threshold stated in the test. NaN anywhere gives infinity.
inline double normalized_error(const std::vector<double>& got, const std::vector<double>& want,
                               double floor = 1e-6) {
  EXPECT_EQ(got.size(), want.size());
  double scale = floor, err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::fabs(want[i]));
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::fabs(got[i] - want[i]));
  }
  return err / scale;
}

// Number of elements further apart than `ulps` bf16 steps of the reference
// value (a relative step of 2^-8 per ulp), plus an absolute floor.
inline int64_t bf16_mismatches(const std::vector<double>& got, const std::vector<double>& want, double ulps,
                               double abs_floor = 1e-30) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = ulps * std::ldexp(std::fabs(want[i]), -8) + abs_floor;
    if (!(std::fabs(got[i] - want[i]) <= tol)) ++bad;
  }
  return bad;
}

inline double bf16_round(double x) { return bf16_to_f32(f32_to_bf16(static_cast<float>(x))); }
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace hyllm::test
