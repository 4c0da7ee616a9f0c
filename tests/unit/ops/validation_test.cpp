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

// An op may write the rows of out and xq.q up to padded_rows(M) when the
// flags say they exist; they must not be another tensor's.
TEST(OpValidation, LinearRowRoomMustNotOverlapAnotherTensor) {
  auto be = make_cpu_backend();
  HostBuffer w(DType::kF8E4M3, {128, 128}), s(DType::kF32, {1, 1}), arena(DType::kU8, {1 << 16});
  auto* base = static_cast<char*>(arena.data());
  auto at = [&](size_t offset, DType dtype, Shape shape) { return TensorView(base + offset, dtype, shape); };
  // out [5, 128] bf16 with room for 8 rows (2 KiB), the codes right after its 5 rows.
  LinearArgs a{{}, LinearWeight::fp8_block(w.view(), s.view()), at(0, DType::kBF16, {5, 128}),
               {ActQuantMode::kGroup128, at(5 * 256, DType::kF8E4M3, {5, 128}), at(8192, DType::kF32, {1, 5})}};
  linear(*be, a);  // without the flags only out's 5 rows are written
  a.out_rows_padded = true;
  auto msg = invalid_message([&] { linear(*be, a); });
  EXPECT_NE(msg.find("out (with its row room) and xq.q overlap"), std::string::npos) << msg;
  a.xq.q = at(8 * 256, DType::kF8E4M3, {5, 128});
  linear(*be, a);
  // A bf16 input is an input too.
  a.x = at(6 * 256, DType::kBF16, {5, 128});
  msg = invalid_message([&] { linear(*be, a); });
  EXPECT_NE(msg.find("out (with its row room) and x overlap"), std::string::npos) << msg;
  a.x = {};
  // The codes' room: 5 rows of 128 at 2048, room to 3072, where the scales now start.
  a.xq.rows_padded = true;
  a.xq.scale = at(2048 + 5 * 128 + 64, DType::kF32, {1, 5});
  msg = invalid_message([&] { linear(*be, a); });
  EXPECT_NE(msg.find("xq.q (with its row room) and xq.scale overlap"), std::string::npos) << msg;
  a.xq.scale = at(3072, DType::kF32, {1, 5});
  linear(*be, a);
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
