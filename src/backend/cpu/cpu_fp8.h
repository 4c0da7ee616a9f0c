#pragma once
// FP8 activation quantisation on the CPU (ActQuantMode in ops.h), shared by
// every op that writes an Fp8Activation and by the FP8 linears, so that a
// fused producer and a linear that quantises its own input give the same bits.

#include <cstdint>

#include "backend/ops.h"

namespace hyllm::cpu {

// Rows of e4m3 codes and their scales in host memory.
struct Fp8Rows {
  ActQuantMode mode = ActQuantMode::kNone;
  const uint8_t* q = nullptr;  // [M, K]
  // kGroup128: the scale of row m, group j at scale[j * scale_stride + m];
  // kStatic: scale[0].
  const float* scale = nullptr;
  int64_t scale_stride = 0;
};

// e4m3 code of clamp(v, -448, 448), round to nearest even.
uint8_t e4m3_code(float v);

// Quantises one row of K values (each a bf16 value held as float): codes to
// q[0..K), and for kGroup128 the group scales to scale[j * scale_stride].
// static_scale is the kStatic scale.
void quantize_row_fp8(const float* x, int64_t K, ActQuantMode mode, float static_scale, uint8_t* q, float* scale,
                      int64_t scale_stride);

// Row `row` of an Fp8Activation from the values of that row.
void quantize_row_fp8(const float* x, const Fp8Activation& out, int64_t row);

// The Fp8Rows view of a host Fp8Activation.
Fp8Rows fp8_rows(const Fp8Activation& a);

// out[M, N] = the FP8 linear of ops.h on already quantised rows.
void linear_forward_fp8(const LinearWeight& w, const Fp8Rows& x, int64_t M, int64_t K, void* out, DType out_dtype);

}  // namespace hyllm::cpu
