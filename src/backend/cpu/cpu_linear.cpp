// Linear layers for the three weight formats. The fp8 formats compute what an
// exact FP8 GEMM computes: activations quantised to e4m3 as the GPU kernels
// quantise them, products of e4m3 values summed exactly, scales applied in
// fp32 in a fixed order (see ops.h).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_common.h"
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

double quantize_e4m3(float v) {
  v = std::clamp(v, -kFp8E4M3Max, kFp8E4M3Max);
  return f8e4m3_to_f32(f32_to_f8e4m3(v));
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

// Dynamic per-token, per-128-column activation quantisation and the
// block-scaled product, in row tiles that bound the scratch memory.
void linear_fp8_block(const LinearWeight& w, const uint16_t* x, int64_t M, void* out, DType out_dtype) {
  const int64_t N = w.weight.dim(0), K = w.weight.dim(1);
  const int64_t num_kb = (K + kFp8BlockSize - 1) / kFp8BlockSize;
  const float* ws = w.weight_scale.data_as<const float>();
  const uint8_t* wq = w.weight.data_as<const uint8_t>();
  const int64_t tile = std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(1, num_kb * N));
  std::vector<double> xq, blocks;
  std::vector<float> xs, y;
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t mt = std::min(tile, M - m0);
    xq.assign(static_cast<size_t>(mt * K), 0.0);
    xs.assign(static_cast<size_t>(mt * num_kb), 0.0f);
    for (int64_t m = 0; m < mt; ++m) {
      const uint16_t* xr = x + (m0 + m) * K;
      for (int64_t j = 0; j < num_kb; ++j) {
        const int64_t k0 = j * kFp8BlockSize, k1 = std::min(K, k0 + kFp8BlockSize);
        float amax = 0.0f;
        for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(bf(xr[k])));
        const float s = std::max(amax, kFp8GroupAmaxFloor) / kFp8E4M3Max;
        xs[m * num_kb + j] = s;
        for (int64_t k = k0; k < k1; ++k) xq[m * K + k] = quantize_e4m3(bf(xr[k]) / s);
      }
    }
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
          acc += (p * xs[m * num_kb + j]) * wsr[j];
        }
        y[i] = acc;
      }
    });
    const size_t esize = dtype_size(out_dtype);
    store_rows(y.data(), mt * N, static_cast<char*>(out) + m0 * N * esize, out_dtype);
  }
}

// Static per-tensor scales (ModelOpt FP8).
void linear_fp8_tensor(const LinearWeight& w, const uint16_t* x, int64_t M, void* out, DType out_dtype) {
  const int64_t N = w.weight.dim(0), K = w.weight.dim(1);
  const float in_scale = w.input_scale.data_as<const float>()[0];
  const float w_scale = w.weight_scale.data_as<const float>()[0];
  const float out_scale = in_scale * w_scale;
  const uint8_t* wq = w.weight.data_as<const uint8_t>();
  const int64_t tile = std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(1, N));
  std::vector<double> xq, acc;
  std::vector<float> y;
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t mt = std::min(tile, M - m0);
    xq.resize(static_cast<size_t>(mt * K));
    for (int64_t i = 0; i < mt * K; ++i) xq[i] = quantize_e4m3(bf(x[m0 * K + i]) / in_scale);
    acc.assign(static_cast<size_t>(mt * N), 0.0);
    gemm_fp8_exact(xq.data(), mt, K, wq, N, 0, acc.data());
    y.resize(static_cast<size_t>(mt * N));
    for (int64_t i = 0; i < mt * N; ++i) y[i] = static_cast<float>(acc[i]) * out_scale;
    const size_t esize = dtype_size(out_dtype);
    store_rows(y.data(), mt * N, static_cast<char*>(out) + m0 * N * esize, out_dtype);
  }
}

}  // namespace

void linear_forward(const LinearWeight& w, const uint16_t* x, int64_t M, void* out, DType out_dtype) {
  if (M == 0) return;
  switch (w.format) {
    case WeightFormat::kBf16: return linear_bf16(w, x, M, out, out_dtype);
    case WeightFormat::kFp8Block: return linear_fp8_block(w, x, M, out, out_dtype);
    case WeightFormat::kFp8Tensor: return linear_fp8_tensor(w, x, M, out, out_dtype);
  }
  fail(ErrorCode::kInternal, "linear: unknown weight format {}", static_cast<int>(w.format));
}

}  // namespace cpu

void CpuKernels::linear(const LinearArgs& a) {
  cpu::linear_forward(a.w, a.x.data_as<const uint16_t>(), a.x.dim(0), a.out.data(), a.out.dtype());
}

}  // namespace hyllm
