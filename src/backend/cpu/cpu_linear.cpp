// Linear layers for the three weight formats. The fp8 formats compute what an
// exact FP8 GEMM computes: activations quantised to e4m3 as the GPU kernels
// quantise them, products of e4m3 values summed exactly, scales applied in
// fp32 in a fixed order (see ops.h).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {
namespace cpu {
namespace {

void store_rows(const float* y, int64_t count, void* out, DType out_dtype) {
  if (out_dtype == DType::kF32) {
    std::copy(y, y + count, static_cast<float*>(out));
  } else {
    f32_to_bf16_row(y, static_cast<uint16_t*>(out), count);
  }
}

// Row tiles bound the f32 scratch; each tile re-converts the weight tiles,
// which costs little next to the tile's products.
void linear_bf16(const LinearWeight& w, const uint16_t* x, int64_t M, void* out, DType out_dtype) {
  const int64_t N = w.weight.dim(0), K = w.weight.dim(1);
  constexpr int64_t kRowTile = 512;
  std::vector<float> xf, y;
  const size_t esize = dtype_size(out_dtype);
  for (int64_t m0 = 0; m0 < M; m0 += kRowTile) {
    const int64_t mt = std::min(kRowTile, M - m0);
    xf.resize(static_cast<size_t>(mt * K));
    bf16_to_f32_row(x + m0 * K, xf.data(), mt * K);
    float* dst = reinterpret_cast<float*>(static_cast<char*>(out) + m0 * N * esize);
    if (out_dtype != DType::kF32) {
      y.resize(static_cast<size_t>(mt * N));
      dst = y.data();
    }
    gemm_bf16_weight(xf.data(), mt, K, w.weight.data_as<const uint16_t>(), N, dst, N);
    if (out_dtype != DType::kF32) store_rows(y.data(), mt * N, static_cast<char*>(out) + m0 * N * esize, out_dtype);
  }
}

// Rows [m0, m0 + mt) of e4m3 codes as doubles (exact).
void decode_rows(const uint8_t* q, int64_t m0, int64_t mt, int64_t K, std::vector<double>& out) {
  out.resize(static_cast<size_t>(mt * K));
  const uint8_t* src = q + m0 * K;
  for (int64_t i = 0; i < mt * K; ++i) out[i] = f8e4m3_to_f32(src[i]);
}

// The block-scaled product, in row tiles that bound the scratch memory.
void linear_fp8_block(const LinearWeight& w, const Fp8Rows& x, int64_t M, int64_t K, void* out, DType out_dtype) {
  const int64_t N = w.weight.dim(0);
  const int64_t num_kb = (K + kFp8BlockSize - 1) / kFp8BlockSize;
  const float* ws = w.weight_scale.data_as<const float>();
  const uint8_t* wq = w.weight.data_as<const uint8_t>();
  const int64_t tile = std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(1, num_kb * N));
  std::vector<double> xq, blocks;
  std::vector<float> y;
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t mt = std::min(tile, M - m0);
    decode_rows(x.q, m0, mt, K, xq);
    blocks.assign(static_cast<size_t>(mt * num_kb * N), 0.0);
    gemm_fp8_exact(xq.data(), mt, K, wq, N, kFp8BlockSize, blocks.data());
    y.assign(static_cast<size_t>(mt * N), 0.0f);
    parallel(mt * N, 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t m = i / N, n = i % N;
        const float* wsr = ws + (n / kFp8BlockSize) * num_kb;
        float acc = 0.0f;
        for (int64_t j = 0; j < num_kb; ++j) {
          const float p = static_cast<float>(blocks[(m * num_kb + j) * N + n]);
          acc += (p * x.scale[j * x.scale_stride + m0 + m]) * wsr[j];
        }
        y[i] = acc;
      }
    });
    const size_t esize = dtype_size(out_dtype);
    store_rows(y.data(), mt * N, static_cast<char*>(out) + m0 * N * esize, out_dtype);
  }
}

// Per-tensor scales (ModelOpt FP8): one product, one scale.
void linear_fp8_tensor(const LinearWeight& w, const Fp8Rows& x, int64_t M, int64_t K, void* out, DType out_dtype) {
  const int64_t N = w.weight.dim(0);
  const float out_scale = x.scale[0] * w.weight_scale.data_as<const float>()[0];
  const uint8_t* wq = w.weight.data_as<const uint8_t>();
  const int64_t tile = std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(1, N));
  std::vector<double> xq, acc;
  std::vector<float> y;
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t mt = std::min(tile, M - m0);
    decode_rows(x.q, m0, mt, K, xq);
    acc.assign(static_cast<size_t>(mt * N), 0.0);
    gemm_fp8_exact(xq.data(), mt, K, wq, N, 0, acc.data());
    y.resize(static_cast<size_t>(mt * N));
    for (int64_t i = 0; i < mt * N; ++i) y[i] = static_cast<float>(acc[i]) * out_scale;
    const size_t esize = dtype_size(out_dtype);
    store_rows(y.data(), mt * N, static_cast<char*>(out) + m0 * N * esize, out_dtype);
  }
}

}  // namespace

void linear_forward_fp8(const LinearWeight& w, const Fp8Rows& x, int64_t M, int64_t K, void* out, DType out_dtype) {
  if (M == 0) return;
  switch (w.format) {
    case WeightFormat::kFp8Block: return linear_fp8_block(w, x, M, K, out, out_dtype);
    case WeightFormat::kFp8Tensor: return linear_fp8_tensor(w, x, M, K, out, out_dtype);
    case WeightFormat::kBf16: break;
  }
  fail(ErrorCode::kInternal, "linear: {} weights take no fp8 input", weight_format_name(w.format));
}

void linear_forward(const LinearWeight& w, const uint16_t* x, int64_t M, void* out, DType out_dtype) {
  if (M == 0) return;
  if (w.format == WeightFormat::kBf16) return linear_bf16(w, x, M, out, out_dtype);
  // An FP8 weight given a bf16 input quantises it here, as a producer op would.
  const int64_t K = w.in_features();
  const ActQuantMode mode = act_quant_mode_for(w.format);
  const float static_scale = mode == ActQuantMode::kStatic ? w.input_scale.data_as<const float>()[0] : 0.0f;
  std::vector<uint8_t> q(static_cast<size_t>(M * K));
  std::vector<float> scales(mode == ActQuantMode::kStatic ? 1 : static_cast<size_t>((K + 127) / 128 * M));
  if (mode == ActQuantMode::kStatic) scales[0] = static_scale;
  parallel(M, 8, [&](int64_t m0, int64_t m1) {
    std::vector<float> v(static_cast<size_t>(K));
    for (int64_t m = m0; m < m1; ++m) {
      bf16_to_f32_row(x + m * K, v.data(), K);
      quantize_row_fp8(v.data(), K, mode, static_scale, q.data() + m * K, scales.data() + m, M);
    }
  });
  linear_forward_fp8(w, {mode, q.data(), scales.data(), M}, M, K, out, out_dtype);
}

}  // namespace cpu

void CpuKernels::linear(const LinearArgs& a) {
  if (!a.xq.empty()) {
    cpu::linear_forward_fp8(a.w, cpu::fp8_rows(a.xq), a.xq.rows(), a.xq.cols(), a.out.data(), a.out.dtype());
    return;
  }
  cpu::linear_forward(a.w, a.x.data_as<const uint16_t>(), a.x.dim(0), a.out.data(), a.out.dtype());
}

}  // namespace hyllm
