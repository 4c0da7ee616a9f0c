#include "util/status.h"

#include <gtest/gtest.h>

namespace hyllm {

TEST(Status, ResultHoldsValueOrError) {
  Result<int> good = 3;
  EXPECT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  Result<int> bad = Status(ErrorCode::kNotFound, "missing");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kNotFound);
  EXPECT_THROW(bad.value(), Error);
}

TEST(Status, CheckThrowsInternal) {
  try {
    HYLLM_CHECK(1 + 1 == 3, "math is {}", "broken");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("math is broken"), std::string::npos);
  }
}

}  // namespace hyllm
