// bench_cuda_rows: times the per-row kernels (rms_norm, gated_rms_norm,
// swiglu, quantize_fp8; bf16 and FP8 outputs) at the widths of Qwen3.5-27B and
// 35B-A3B, at decode rows (1..32) and prefill rows, each kernel replayed back
// to back from a CUDA graph. Prints microseconds per launch and, for prefill,
// the bytes moved per second. The decode times are bounded below by the
// graph's per-kernel launch cost; compare them with an empty kernel's row.
//   bench_cuda_rows [--iters 200]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../bench_graph_timing.cuh"
#include "backend/cuda/launch/dense.h"
#include "backend/cuda/launch/fp8.h"

namespace {

// bf16 values of a hash in (-2, 2): no NaN or infinity.
__global__ void fill_bf16(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    p[i] = static_cast<uint16_t>(0x3f00u + (h >> 24)) | static_cast<uint16_t>((h & 1u) << 15);
  }
}

__global__ void empty_kernel() {}

struct Case {
  std::string name;
  int width;                // columns of the output
  double input_bytes_per_col;  // read and written besides the output
  std::function<void(int rows, bool fp8, cudaStream_t)> launch;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace hyllm::cuda;
  int iters = 200;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--iters") iters = std::stoi(argv[i + 1]);
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  constexpr int kMaxRows = 8192, kMaxWidth = 2 * 17408;
  const size_t elems = static_cast<size_t>(kMaxRows) * kMaxWidth;
  uint16_t *a, *b, *c, *w;
  uint8_t* q;
  float *scale, *static_scale;
  CHECK(cudaMalloc(&a, elems * 2));
  CHECK(cudaMalloc(&b, elems * 2));
  CHECK(cudaMalloc(&c, elems * 2));
  CHECK(cudaMalloc(&w, kMaxWidth * 2));
  CHECK(cudaMalloc(&q, elems));
  CHECK(cudaMalloc(&scale, elems / 128 * sizeof(float)));
  CHECK(cudaMalloc(&static_scale, sizeof(float)));
  fill_bf16<<<1024, 256, 0, s>>>(a, elems, 1);
  fill_bf16<<<1024, 256, 0, s>>>(b, elems, 2);
  fill_bf16<<<64, 256, 0, s>>>(w, kMaxWidth, 3);
  const float one = 0.01f;
  CHECK(cudaMemcpy(static_scale, &one, sizeof one, cudaMemcpyHostToDevice));
  CHECK(cudaStreamSynchronize(s));
  auto fp8_out = [&](bool on, int rows, int cols) {
    Fp8Out o;
    if (!on) return o;
    o.q = q;
    o.scale = scale;
    o.group_scales = true;
    o.rows = rows;
    o.cols = cols;
    return o;
  };
  auto rms = [&](int width) {
    return [&, width](int rows, bool fp8, cudaStream_t st) {
      RmsNormParams p;
      p.x = a;
      p.weight = w;
      p.residual_in = b;
      p.residual_out = b;
      p.out = fp8 ? nullptr : c;
      p.rows = rows;
      p.width = width;
      p.fp8 = fp8_out(fp8, rows, width);
      launch_rms_norm(p, st);
    };
  };
  auto gated = [&](int heads) {
    return [&, heads](int rows, bool fp8, cudaStream_t st) {
      GatedRmsNormParams p;
      p.x = a;
      p.z = b;
      p.z_stride = 2 * heads * 128;
      p.weight = w;
      p.out = fp8 ? nullptr : c;
      p.rows = rows;
      p.num_heads = heads;
      p.head_dim = 128;
      p.fp8 = fp8_out(fp8, rows, heads * 128);
      launch_gated_rms_norm(p, st);
    };
  };
  auto swiglu = [&](int inter) {
    return [&, inter](int rows, bool fp8, cudaStream_t st) {
      SwigluParams p;
      p.x = a;
      p.x_stride = 2 * inter;
      p.out = fp8 ? nullptr : c;
      p.rows = rows;
      p.inter = inter;
      p.fp8 = fp8_out(fp8, rows, inter);
      launch_swiglu(p, st);
    };
  };
  auto quantize = [&](int cols) {
    return [&, cols](int rows, bool, cudaStream_t st) {
      QuantizeFp8Params p;
      p.x = a;
      p.x_stride = cols;
      p.out = fp8_out(true, rows, cols);
      launch_quantize_fp8(p, st);
    };
  };
  const std::vector<Case> cases = {
      {"rms_norm + residual (27B)", 5120, 6.0, rms(5120)},
      {"rms_norm + residual (35B)", 2048, 6.0, rms(2048)},
      {"gated_rms_norm 48 x 128 (27B)", 6144, 4.0, gated(48)},
      {"gated_rms_norm 32 x 128 (35B)", 4096, 4.0, gated(32)},
      {"swiglu (27B, inter 17408)", 17408, 4.0, swiglu(17408)},
      {"swiglu (35B shared, inter 512)", 512, 4.0, swiglu(512)},
      {"quantize_fp8 (27B, 5120)", 5120, 2.0, quantize(5120)},
      {"quantize_fp8 (27B, 6144)", 6144, 2.0, quantize(6144)},
  };
  const double empty = graph_seconds_per_launch(s, iters, [](int, cudaStream_t st) { empty_kernel<<<1, 32, 0, st>>>(); });
  std::printf("empty kernel: %.2f us per launch\n\n", empty * 1e6);
  std::printf("| kernel | output | 1 | 3 | 32 | 256 | 2048 | 8192 rows |\n|---|---|---|---|---|---|---|---|\n");
  for (const Case& k : cases) {
    for (bool fp8 : {false, true}) {
      if (!fp8 && k.name.rfind("quantize", 0) == 0) continue;
      std::printf("| %s | %s |", k.name.c_str(), fp8 ? "fp8" : "bf16");
      for (int rows : {1, 3, 32, 256, 2048, 8192}) {
        const int it = rows >= 2048 ? std::max(5, iters / 10) : iters;
        const double t = graph_seconds_per_launch(s, it, [&](int, cudaStream_t st) { k.launch(rows, fp8, st); });
        CHECK(cudaGetLastError());
        if (rows >= 2048)
          std::printf(" %.1f us, %.2f TB/s |", t * 1e6, k.width * (k.input_bytes_per_col + (fp8 ? 1 : 2)) * rows / t / 1e12);
        else
          std::printf(" %.2f us |", t * 1e6);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(w);
  cudaFree(q);
  cudaFree(scale);
  cudaFree(static_scale);
  return 0;
}
