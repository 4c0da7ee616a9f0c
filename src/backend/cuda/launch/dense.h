#pragma once
// Launchers of the dense elementwise and row kernels. Plain structs of device
// pointers and sizes: this header is free of hyllm's host headers so that .cu
// files can include it (fmt does not build under nvcc). Pointers to bf16 data
// are uint16_t bit patterns; a column slice is a pointer to its first element
// plus the row stride of the tensor it lives in.

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/launch/fp8.h"

namespace hyllm::cuda {

struct RmsNormParams {
  const uint16_t* x = nullptr;
  const void* weight = nullptr;
  bool weight_f32 = false;
  uint16_t* out = nullptr;
  const uint16_t* residual_in = nullptr;  // optional
  uint16_t* residual_out = nullptr;       // optional, may equal residual_in
  int rows = 0;
  int width = 0;
  float eps = 1e-6f;
  bool plus_one = true;
  Fp8Out fp8;  // optional; out may then be null
};
void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);

struct GatedRmsNormParams {
  const uint16_t* x = nullptr;  // [rows, heads * head_dim]
  const uint16_t* z = nullptr;  // column slice
  int64_t z_stride = 0;
  const void* weight = nullptr;  // [head_dim]
  bool weight_f32 = false;
  uint16_t* out = nullptr;
  int rows = 0;
  int num_heads = 0;
  int head_dim = 0;
  float eps = 1e-6f;
  Fp8Out fp8;  // optional; out may then be null
};
void launch_gated_rms_norm(const GatedRmsNormParams& p, cudaStream_t stream);

struct SwigluParams {
  const uint16_t* x = nullptr;  // column slice: [gate | up], 2 * inter wide
  int64_t x_stride = 0;
  uint16_t* out = nullptr;  // [rows, inter], optional with fp8
  int rows = 0;
  int inter = 0;
  Fp8Out fp8;  // optional
};
void launch_swiglu(const SwigluParams& p, cudaStream_t stream);

struct EmbeddingParams {
  const int32_t* ids = nullptr;
  const uint16_t* table = nullptr;
  uint16_t* out = nullptr;
  int tokens = 0;
  int64_t vocab = 0;        // rows of the table
  int64_t vocab_start = 0;  // the whole vocabulary's id of table row 0
  int width = 0;
};
void launch_embedding(const EmbeddingParams& p, cudaStream_t stream);

struct GatherRowsParams {
  const void* src = nullptr;
  const int32_t* indices = nullptr;
  void* out = nullptr;
  int rows = 0;
  int64_t src_rows = 0;
  int64_t row_bytes = 0;
};
void launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream);

}  // namespace hyllm::cuda
