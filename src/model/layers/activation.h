#pragma once
// An activation in the forms its consumers read: bf16 for BF16 projections
// (and for ops other than linears), and the FP8 codes of ops.h for FP8
// projections. The producer of an activation writes every form its consumers
// need in one op, so that each FP8 input is quantised once however many
// projections read it.

#include <cstdint>

#include "backend/ops.h"
#include "model/layers/scratch.h"

namespace hyllm {

struct LayerInput {
  TensorView x;      // [T, K] bf16; empty when no consumer reads bf16
  Fp8Activation xq;  // [T, K]; empty when no consumer reads FP8

  int64_t rows() const { return !x.empty() ? x.dim(0) : xq.rows(); }
};

// What the consumers of one activation need from its producer.
struct InputNeeds {
  ActQuantMode mode = ActQuantMode::kNone;  // the FP8 consumers' input mode
  TensorView static_scale;                  // kStatic: their one input scale
  bool bf16 = false;                        // some consumer reads bf16

  static InputNeeds bf16_only() { return {ActQuantMode::kNone, {}, true}; }
  // Adds another consumer's needs. FP8 consumers that disagree on the mode or
  // the static scale cannot share codes: the later ones then read bf16 and
  // quantise for themselves (correct, and counted by the op counters).
  InputNeeds& operator|=(const InputNeeds& o) {
    bf16 = bf16 || o.bf16;
    if (o.mode == ActQuantMode::kNone) return *this;
    if (mode == ActQuantMode::kNone) {
      mode = o.mode;
      static_scale = o.static_scale;
    } else if (mode != o.mode || static_scale.data() != o.static_scale.data()) {
      bf16 = true;
    }
    return *this;
  }
};

// Buffers for an activation of T rows and K columns in the forms `needs` asks
// for, taken from the scratch arena (with its row room, see Scratch).
inline LayerInput take_input(Scratch& s, const InputNeeds& needs, int64_t T, int64_t K) {
  LayerInput in;
  if (needs.bf16 || needs.mode == ActQuantMode::kNone) in.x = s.take(DType::kBF16, Shape{T, K});
  if (needs.mode == ActQuantMode::kNone) return in;
  in.xq.mode = needs.mode;
  in.xq.q = s.take(DType::kF8E4M3, Shape{T, K});
  in.xq.rows_padded = true;
  in.xq.scale = needs.mode == ActQuantMode::kGroup128
                    ? s.take(DType::kF32, Shape{(K + kFp8BlockSize - 1) / kFp8BlockSize, T})
                    : needs.static_scale;
  return in;
}

// Scratch bytes take_input uses (an upper bound).
inline size_t input_bytes(const InputNeeds& needs, int64_t T, int64_t K) {
  size_t b = Scratch::bytes_for(DType::kBF16, T, K);
  if (needs.mode != ActQuantMode::kNone)
    b += Scratch::bytes_for(DType::kF8E4M3, T, K) +
         Scratch::bytes_for(DType::kF32, (K + kFp8BlockSize - 1) / kFp8BlockSize, T);
  return b;
}

// Fixed buffers for an activation of up to `capacity` rows in every form (the
// model's normalised layer inputs, which outlive the scratch scopes of the
// layers that write them). The rows are backed up to padded_rows(capacity),
// so every view has the row room of ops.h's kActivationRowPad.
class ActivationBuffers {
 public:
  ActivationBuffers() = default;
  ActivationBuffers(Backend& be, int64_t capacity, int64_t cols, bool fp8)
      : x_(be, DType::kBF16, Shape{padded_rows(capacity), cols}), capacity_(capacity), cols_(cols) {
    if (!fp8) return;
    q_ = DeviceBuffer(be, DType::kF8E4M3, Shape{padded_rows(capacity), cols});
    scale_ = DeviceBuffer(be, DType::kF32, Shape{(cols + kFp8BlockSize - 1) / kFp8BlockSize, capacity});
  }
  // The first T rows in the forms `needs` asks for.
  LayerInput view(const InputNeeds& needs, int64_t T) const {
    HYLLM_CHECK(T <= capacity_, "{} rows of an activation buffer of {}", T, capacity_);
    LayerInput in;
    if (needs.bf16 || needs.mode == ActQuantMode::kNone) in.x = x_.view().slice_rows(0, T);
    if (needs.mode == ActQuantMode::kNone) return in;
    HYLLM_CHECK(q_.data() != nullptr, "no FP8 buffers for an FP8 input");
    in.xq.mode = needs.mode;
    in.xq.q = q_.view().slice_rows(0, T);
    in.xq.rows_padded = true;
    // The group-major scales of T rows are the first groups * T floats.
    const int64_t groups = (cols_ + kFp8BlockSize - 1) / kFp8BlockSize;
    in.xq.scale = needs.mode == ActQuantMode::kGroup128
                      ? TensorView(scale_.data(), DType::kF32, Shape{groups, T}, q_.view().device())
                      : needs.static_scale;
    return in;
  }
  size_t bytes() const { return x_.size() + q_.size() + scale_.size(); }

 private:
  DeviceBuffer x_, q_, scale_;
  int64_t capacity_ = 0, cols_ = 0;
};

}  // namespace hyllm
