#include "util/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace hyllm {
namespace {

TEST(JsonDepth, CountsArraysAndObjectsOutsideStringsOnly) {
  EXPECT_TRUE(json_depth_within(R"({"a": [[1]]})", 3));
  EXPECT_FALSE(json_depth_within(R"({"a": [[1]]})", 2));
  // Brackets inside strings, escaped quotes included, are text.
  EXPECT_TRUE(json_depth_within(R"({"a": "[[[[\"[[[[", "b": "}}}"})", 1));
  EXPECT_FALSE(json_depth_within(R"({"a": "\\", "b": [[1]]})", 2));
  EXPECT_TRUE(json_depth_within(std::string(64, '[') + std::string(64, ']'), 64));
  EXPECT_FALSE(json_depth_within(std::string(65, '[') + std::string(65, ']'), 64));
  // Siblings do not add up.
  EXPECT_TRUE(json_depth_within("[[1],[2],[3],{\"a\":1}]", 2));
}

}  // namespace
}  // namespace hyllm
