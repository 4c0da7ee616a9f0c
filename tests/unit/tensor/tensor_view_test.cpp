#include "tensor/host_buffer.h"

#include <gtest/gtest.h>

namespace hyllm {

TEST(TensorView, ReshapeAndSliceRows) {
  HostBuffer buf(DType::kF32, Shape{4, 3});
  float* p = buf.data_as<float>();
  for (int i = 0; i < 12; ++i) p[i] = static_cast<float>(i);
  TensorView v = buf.view();
  EXPECT_EQ(v.numel(), 12);
  EXPECT_EQ(v.nbytes(), 48u);
  TensorView rows = v.slice_rows(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  EXPECT_EQ(rows.data_as<float>()[0], 3.0f);
  EXPECT_EQ(v.reshape(Shape{12}).dim(0), 12);
  EXPECT_THROW(v.reshape(Shape{5}), Error);
  EXPECT_THROW(v.slice_rows(2, 5), Error);
}

TEST(Shape, NegativeIndexAndString) {
  Shape s{2, 3, 5};
  EXPECT_EQ(s[-1], 5);
  EXPECT_EQ(s.numel(), 30);
  EXPECT_EQ(s.str(), "[2, 3, 5]");
}

}  // namespace hyllm
