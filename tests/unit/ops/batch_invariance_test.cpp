// Batch invariance of the CPU kernels (cpu_kernels.h): a row computed in a
// batch of M rows equals, bit for bit, the same row computed alone.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "ops_test_util.h"

namespace hyllm::test {
namespace {

TEST(BatchInvariance, LinearRowDoesNotDependOnTheRowCount) {
  auto be = make_cpu_backend();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Rng rng(seed);
  // K not a multiple of 8 (the scalar tail), N not a multiple of 4 or 8.
  for (auto [K, N] : {std::pair<int64_t, int64_t>{203, 130}, {64, 48}}) {
    HostTensor w = bf16_tensor({N, K});
    w.fill_normal(rng, 0.1);
    constexpr int64_t kMaxRows = 300;
    HostTensor x = bf16_tensor({kMaxRows, K});
    x.fill_normal(rng);
    for (DType od : {DType::kF32, DType::kBF16}) {
      // Each row alone.
      std::vector<double> alone;
      for (int64_t m = 0; m < kMaxRows; ++m) {
        HostTensor xm = bf16_tensor({1, K}), out(od, {1, N});
        for (int64_t k = 0; k < K; ++k) xm.set(k, x.v[m * K + k]);
        linear(*be, {xm.view(), LinearWeight::bf16(w.view()), out.view()});
        const auto v = out.values();
        alone.insert(alone.end(), v.begin(), v.end());
      }
      for (int64_t M : {1, 2, 7, 16, 17, 64, 300}) {
        HostTensor xm = bf16_tensor({M, K}), out(od, {M, N});
        for (int64_t i = 0; i < M * K; ++i) xm.set(i, x.v[i]);
        out.poison();
        linear(*be, {xm.view(), LinearWeight::bf16(w.view()), out.view()});
        const auto v = out.values();
        ASSERT_EQ(v, std::vector<double>(alone.begin(), alone.begin() + M * N)) << "M=" << M << " K=" << K;
      }
    }
  }
}

}  // namespace
}  // namespace hyllm::test
