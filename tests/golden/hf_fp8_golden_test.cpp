// The CPU backend against HF transformers' own FP8 path: dense_flat_aligned
// quantised to block FP8 by hyllm's quantiser (hf_fp8_golden.h for the rules).

#include <unistd.h>

#include "hf_fp8_golden.h"

namespace hyllm::testing {
namespace {

class HfFp8GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(hf_fp8_golden_file())) {
      GTEST_SKIP() << hf_fp8_golden_file().string()
                   << " is not committed yet: it is made on the GPU machine by tools/goldens/make_fp8_goldens.py";
    }
    golden_ = load_hf_fp8_golden();
    dir_ = std::filesystem::temp_directory_path() / ("hyllm_hf_fp8_" + std::to_string(::getpid()));
    quantize_for_hf_fp8_golden(dir_, golden_);
    harness_ = std::make_unique<Harness>(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  testing::HfFp8Golden golden_;
  std::filesystem::path dir_;
  std::unique_ptr<Harness> harness_;
};

TEST_F(HfFp8GoldenTest, TeacherForcedLogitsMatchHf) { check_hf_fp8_teacher_forced(*harness_, golden_, "cpu"); }

TEST_F(HfFp8GoldenTest, GreedyTokensMatchHf) { check_hf_fp8_greedy(*harness_, golden_, "cpu"); }

}  // namespace
}  // namespace hyllm::testing
