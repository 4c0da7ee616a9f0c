// The op entry points reject malformed arguments with kInvalidArgument before
// any kernel runs, naming the op and the field.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "tensor/host_buffer.h"

namespace hyllm {
namespace {

template <typename Fn>
std::string invalid_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception " << e.what();
    return {};
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(OpValidation, LinearShapeAndDtype) {
  auto be = make_cpu_backend();
  HostBuffer x(DType::kBF16, {3, 8}), w(DType::kBF16, {4, 8}), out(DType::kBF16, {3, 5}), xf(DType::kF32, {3, 8});
  LinearArgs a{x.view(), LinearWeight::bf16(w.view()), out.view()};
  auto msg = invalid_message([&] { linear(*be, a); });
  EXPECT_NE(msg.find("linear"), std::string::npos);
  EXPECT_NE(msg.find("out"), std::string::npos);
  a.x = xf.view();
  msg = invalid_message([&] { linear(*be, a); });
  EXPECT_NE(msg.find("dtype"), std::string::npos);
}

TEST(OpValidation, Fp8BlockNeedsScalesOfTheRightShape) {
  auto be = make_cpu_backend();
  HostBuffer x(DType::kBF16, {2, 256}), w(DType::kF8E4M3, {130, 256}), s(DType::kF32, {1, 2}),
      out(DType::kBF16, {2, 130});
  LinearArgs a{x.view(), LinearWeight::fp8_block(w.view(), s.view()), out.view()};
  auto msg = invalid_message([&] { linear(*be, a); });
  EXPECT_NE(msg.find("weight_scale"), std::string::npos);
}

// An op may write the rows of out up to padded_rows(M) when out_rows_padded
// says they exist; they must not be any input's.
TEST(OpValidation, LinearPaddedOutputRowsMustNotOverlapTheInput) {
  auto be = make_cpu_backend();
  HostBuffer w(DType::kF8E4M3, {128, 128}), s(DType::kF32, {1, 1}), arena(DType::kU8, {1 << 16});
  auto* base = static_cast<char*>(arena.data());
  // out [5, 128] bf16 with room for 8 rows (2 KiB), the codes right after its 5 rows.
  TensorView out(base, DType::kBF16, Shape{5, 128}, Device::cpu());
  TensorView q(base + 5 * 256, DType::kF8E4M3, Shape{5, 128}, Device::cpu());
  TensorView scale(base + 8192, DType::kF32, Shape{1, 5}, Device::cpu());
  LinearArgs a{{}, LinearWeight::fp8_block(w.view(), s.view()), out, {ActQuantMode::kGroup128, q, scale}};
  linear(*be, a);  // without the flag only out's 5 rows are written
  a.out_rows_padded = true;
  auto msg = invalid_message([&] { linear(*be, a); });
  EXPECT_NE(msg.find("out's padded rows and xq.q overlap"), std::string::npos) << msg;
  a.xq.q = TensorView(base + 8 * 256, DType::kF8E4M3, Shape{5, 128}, Device::cpu());
  linear(*be, a);
  // A bf16 input is an input too.
  a.x = TensorView(base + 6 * 256, DType::kBF16, Shape{5, 128}, Device::cpu());
  msg = invalid_message([&] { linear(*be, a); });
  EXPECT_NE(msg.find("and x overlap"), std::string::npos) << msg;
}

TEST(OpValidation, ColumnSliceOutOfRange) {
  auto be = make_cpu_backend();
  HostBuffer x(DType::kBF16, {2, 10}), out(DType::kBF16, {2, 4});
  SwigluArgs a{ColSlice(x.view(), 4, 8), out.view()};
  auto msg = invalid_message([&] { swiglu(*be, a); });
  EXPECT_NE(msg.find("exceed"), std::string::npos);
}

TEST(OpValidation, AttentionHeadsMustDivide) {
  auto be = make_cpu_backend();
  PagedAttentionArgs a;
  a.num_q_heads = 3;
  a.num_kv_heads = 2;
  a.head_dim = 4;
  auto msg = invalid_message([&] { paged_attention(*be, a); });
  EXPECT_NE(msg.find("multiple"), std::string::npos);
}

TEST(OpValidation, DeltaRuleStateShape) {
  auto be = make_cpu_backend();
  const int T = 3, Hk = 1, Hv = 2, Dk = 4, Dv = 8;
  HostBuffer qkv(DType::kBF16, {T, 2 * Hk * Dk + Hv * Dv}), ab(DType::kBF16, {T, 2 * Hv}),
      alog(DType::kF32, {Hv}), dt(DType::kF32, {Hv}), state(DType::kF32, {2, Hv, Dk, Dv}),
      qsl(DType::kI32, {2}), idx(DType::kI32, {1}), init(DType::kI32, {1}), out(DType::kBF16, {T, Hv * Dv});
  GatedDeltaRuleArgs a{qkv.view(), ColSlice(ab.view(), 0, Hv), ColSlice(ab.view(), Hv, Hv), alog.view(),
                       dt.view(), state.view(), qsl.view(), idx.view(), init.view(), out.view(),
                       Hk, Hv, Dk, Dv, DeltaRuleAlgorithm::kChunked, 0};
  auto msg = invalid_message([&] { gated_delta_rule(*be, a); });  // state is [slots, Hv, Dv, Dk]
  EXPECT_NE(msg.find("state"), std::string::npos);
}

}  // namespace
}  // namespace hyllm
