// The CUDA backend against HF transformers' own FP8 path: dense_flat_aligned
// quantised to block FP8 by hyllm's quantiser (tests/golden/hf_fp8_golden.h
// for the rules), through the real runner path (GPU sampler, decode graphs).

#include <unistd.h>

#include "backend/cuda/cuda_backend.h"
#include "hf_fp8_golden.h"

namespace hyllm::testing {
namespace {

class CudaHfFp8Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    if (!std::filesystem::exists(hf_fp8_golden_file())) {
      GTEST_SKIP() << hf_fp8_golden_file().string()
                   << " is not committed yet: it is made on the GPU machine by tools/goldens/make_fp8_goldens.py";
    }
    golden_ = load_hf_fp8_golden();
    dir_ = std::filesystem::temp_directory_path() / ("hyllm_cuda_hf_fp8_" + std::to_string(::getpid()));
    quantize_for_hf_fp8_golden(dir_, golden_);
    gpu_ = std::make_unique<Harness>(
        dir_, make_cuda_backend(0), 1024,
        [](Backend& be) { return std::shared_ptr<DeviceSampler>(make_cuda_sampler(be)); },
        [](Backend& be) -> GraphRecorder {
          return [&be](const std::function<void()>& body) { return cuda_capture_graph(be, body); };
        });
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  HfFp8Golden golden_;
  std::filesystem::path dir_;
  std::unique_ptr<Harness> gpu_;
};

TEST_F(CudaHfFp8Golden, TeacherForcedLogitsMatchHf) { check_hf_fp8_teacher_forced(*gpu_, golden_, "cuda"); }

TEST_F(CudaHfFp8Golden, GreedyTokensMatchHf) { check_hf_fp8_greedy(*gpu_, golden_, "cuda"); }

}  // namespace
}  // namespace hyllm::testing
