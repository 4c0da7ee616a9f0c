// Harness: fill_random (dummy weights made on the device) gives the CPU
// reference's bytes exactly.
#include <cstring>

#include "cuda_test_util.h"

namespace hyllm::test {
namespace {

TEST_F(CudaOpTest, FillRandomIsBitIdentical) {
  // (offset, scale): a small affine range, and the dummy FP8 weights' e4m3
  // codes of N(0, 112) (dummy_weights.h), whose rounding covers every code.
  for (auto [dtype, offset, scale] : {std::tuple{DType::kBF16, -0.1f, 0.2f}, std::tuple{DType::kF32, -0.1f, 0.2f},
                                      std::tuple{DType::kF8E4M3, -0.1f, 0.2f}, std::tuple{DType::kF8E4M3, 0.0f, 112.0f}}) {
    for (RandomDistribution dist : {RandomDistribution::kNormal, RandomDistribution::kUniform}) {
      for (int64_t n : {int64_t{1}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " n=" << n << " dist=" << static_cast<int>(dist)
                                        << " scale=" << scale);
        HostTensor out(dtype, Shape{n});
        const FillRandomArgs args{out.view(), 0x1234567890abcdefull + static_cast<uint64_t>(n), dist, offset, scale};
        fill_random(*cpu_, args);
        Mirror dout(*gpu_, out);
        dout.poison();
        FillRandomArgs on_gpu = args;
        on_gpu.dst = dout.view();
        fill_random(*gpu_, on_gpu);
        HostTensor back(dtype, Shape{n});
        gpu_->copy_to_host(back.buf.data(), dout.view().data(), back.buf.size());
        ASSERT_EQ(std::memcmp(back.buf.data(), out.buf.data(), back.buf.size()), 0);
      }
    }
  }
}

}  // namespace
}  // namespace hyllm::test
