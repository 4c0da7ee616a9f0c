// Prints the per-op error table after all tests (the device script shows it).
#include <cstdio>

#include "cuda_test_util.h"

namespace hyllm::test {
namespace {

class SummaryEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (error_table().empty()) return;
    std::printf("\n%-40s %12s %12s\n", "cuda op output", "max error", "threshold");
    for (const auto& [name, e] : error_table()) {
      std::printf("%-40s %12.3e %12.3e %s\n", name.c_str(), e.first, e.second, e.first <= e.second ? "ok" : "FAIL");
    }
  }
};

const auto* const kSummary = ::testing::AddGlobalTestEnvironment(new SummaryEnvironment);

}  // namespace
}  // namespace hyllm::test
