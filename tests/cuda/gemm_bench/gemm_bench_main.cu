// bench_cuda_gemm: times the linear's GEMM kernels on the projection shapes of
// Qwen3.5-27B and 35B-A3B, each kernel replayed back to back from a CUDA graph
// over rotating weight copies larger than L2 (so weights come from HBM):
// FP8 (block and per-tensor scales) on fp8_gemv (the decode kernels: as
// launch_fp8_gemv picks, TMA-fed for large weights, and on the register tiles) and on
// cuBLASLt, and BF16 on cuBLASLt, at decode rows
// (M = 1..64) and prefill rows. Prints weight bandwidth against the measured
// copy rate (4.28 TB/s) and, for prefill, TFLOP/s. Used to choose the M at
// which the linear switches kernels.
//   bench_cuda_gemm [--iters 50] [--max-m 4096] [--probe-rows] [--sweep-tma FULL_LOG] [--algo-ranks N]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../bench_graph_timing.cuh"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/fp8_gemv_tma.h"
#include "backend/cuda/launch/fp8.h"

namespace {

constexpr double kCopyBandwidth = 4.28e12;

struct ShapeCase {
  const char* name;
  int N, K;
};

// Random bytes that are valid e4m3 codes (no NaN: 0x7f / 0xff excluded).
__global__ void fill_codes(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    uint8_t c = static_cast<uint8_t>(h >> 24) & 0x77;  // |value| well below 448
    p[i] = c;
  }
}
__global__ void fill_f32(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = v;
}

// One shape's FP8 operands for up to max_rows rows: enough copies of the e4m3
// weights that they exceed L2 more than four times over (so that rotating
// through them reads HBM), their block and per-tensor scales, the rows' codes
// and block scales, and an output of f32 width.
struct Fp8Operands {
  size_t wbytes;
  int copies;
  std::vector<uint8_t*> w;
  float *wsb = nullptr, *wst = nullptr, *xs = nullptr;
  uint8_t* x = nullptr;
  void* out = nullptr;

  Fp8Operands(const ShapeCase& sc, int max_rows, cudaStream_t s)
      : wbytes(static_cast<size_t>(sc.N) * sc.K), copies(std::max<int>(2, static_cast<int>(200e6 / wbytes) + 1)) {
    const int kb = (sc.K + 127) / 128, nb = (sc.N + 127) / 128;
    w.resize(copies);
    for (int c = 0; c < copies; ++c) {
      CHECK(cudaMalloc(&w[c], wbytes));
      fill_codes<<<1024, 256, 0, s>>>(w[c], wbytes, 17u * c + 1);
    }
    CHECK(cudaMalloc(&wsb, sizeof(float) * nb * kb));
    CHECK(cudaMalloc(&wst, sizeof(float)));
    CHECK(cudaMalloc(&xs, sizeof(float) * kb * max_rows));
    CHECK(cudaMalloc(&x, static_cast<size_t>(max_rows) * sc.K));
    CHECK(cudaMalloc(&out, static_cast<size_t>(max_rows) * sc.N * 4));
    fill_f32<<<64, 256, 0, s>>>(wsb, static_cast<size_t>(nb) * kb, 1e-3f);
    fill_f32<<<1, 32, 0, s>>>(wst, 1, 1e-3f);
    fill_f32<<<64, 256, 0, s>>>(xs, static_cast<size_t>(kb) * max_rows, 1e-2f);
    fill_codes<<<1024, 256, 0, s>>>(x, static_cast<size_t>(max_rows) * sc.K, 99);
    CHECK(cudaStreamSynchronize(s));
  }
  ~Fp8Operands() {
    for (uint8_t* c : w) cudaFree(c);
    cudaFree(wsb);
    cudaFree(wst);
    cudaFree(xs);
    cudaFree(x);
    cudaFree(out);
  }
  Fp8Operands(const Fp8Operands&) = delete;
  Fp8Operands& operator=(const Fp8Operands&) = delete;
};

// Launch i reads weight copy i % copies, so that the weights come from HBM.
template <typename F>
double time_graph(cudaStream_t s, int copies, int iters, F&& launch_copy) {
  return graph_seconds_per_launch(s, iters, [&](int i, cudaStream_t st) { launch_copy(i % copies, st); });
}

// Which row counts cuBLASLt's FP8 algorithms take (hyllm::cuda::kFp8BlockRowMultiple):
// one line per scale format listing the refused M of 1..64 and of a few prefill sizes.
int probe_row_counts(hyllm::cuda::GemmRunner& gemm, cudaStream_t s) {
  const int N = 4096, K = 4096, max_rows = 4100;
  uint8_t *w, *x;
  float* scales;
  void* out;
  CHECK(cudaMalloc(&w, static_cast<size_t>(N) * K));
  CHECK(cudaMalloc(&x, static_cast<size_t>(max_rows) * K));
  CHECK(cudaMalloc(&scales, sizeof(float) * (K / 128) * std::max(N / 128, max_rows)));
  CHECK(cudaMalloc(&out, static_cast<size_t>(max_rows) * N * 2));
  std::vector<int> rows;
  for (int m = 1; m <= 64; ++m) rows.push_back(m);
  for (int m : {1281, 1282, 1283, 1284, 1288, 4093, 4094, 4095, 4096}) rows.push_back(m);
  for (bool block : {true, false}) {
    std::string refused;
    for (int m : rows) {
      const bool ok = gemm.run_fp8(x, scales, w, scales,
                                   block ? hyllm::cuda::GemmRunner::Fp8Scales::kBlock : hyllm::cuda::GemmRunner::Fp8Scales::kTensor,
                                   out, false, m, N, K, s);
      if (!ok) refused += " " + std::to_string(m);
    }
    std::printf("cuBLASLt fp8 %s scales, N = K = %d: refused M:%s\n", block ? "block" : "per-tensor", N,
                refused.empty() ? " none" : refused.c_str());
  }
  CHECK(cudaStreamSynchronize(s));
  cudaFree(w);
  cudaFree(x);
  cudaFree(scales);
  cudaFree(out);
  return 0;
}

// cuBLASLt's FP8 GEMMs at prefill rows with each of the heuristic's first
// `ranks` answers (GemmRunner's algo_rank): TFLOP/s per rank, "-" where it
// gave fewer, and the best rank's gain over its first choice, the engine's.
int sweep_algo_ranks(const std::vector<ShapeCase>& shapes, int ranks, int iters, cudaStream_t s) {
  std::vector<std::unique_ptr<hyllm::cuda::GemmRunner>> runners;
  for (int r = 0; r < ranks; ++r) runners.push_back(std::make_unique<hyllm::cuda::GemmRunner>(r));
  std::printf("| shape | M | scales |");
  for (int r = 0; r < ranks; ++r) std::printf(" rank %d TF/s |", r);
  std::printf(" best vs rank 0 |\n|---|---:|---|");
  for (int r = 0; r <= ranks; ++r) std::printf("---:|");
  std::printf("\n");
  for (const ShapeCase& sc : shapes) {
    const Fp8Operands o(sc, 8192, s);
    for (int M : {1024, 4096, 8192}) {
      for (bool block : {true, false}) {
        const auto scales = block ? hyllm::cuda::GemmRunner::Fp8Scales::kBlock
                                  : hyllm::cuda::GemmRunner::Fp8Scales::kTensor;
        std::printf("| %s | %d | %s |", sc.name, M, block ? "block" : "tensor");
        double first = -1, best = -1;
        for (int r = 0; r < ranks; ++r) {
          hyllm::cuda::GemmRunner& g = *runners[r];
          // Planned outside the capture (the heuristic must not run inside it).
          if (!g.run_fp8(o.x, block ? o.xs : o.wst, o.w[0], block ? o.wsb : o.wst, scales, o.out, false, M, sc.N, sc.K,
                         s)) {
            std::printf(" - |");
            continue;
          }
          const double t = time_graph(s, o.copies, iters, [&](int c, cudaStream_t st) {
            g.run_fp8(o.x, block ? o.xs : o.wst, o.w[c], block ? o.wsb : o.wst, scales, o.out, false, M, sc.N, sc.K,
                      st);
          });
          const double tflops = 2.0 * M * sc.N * sc.K / t / 1e12;
          if (r == 0) first = tflops;
          best = std::max(best, tflops);
          std::printf(" %.0f |", tflops);
        }
        if (first > 0) std::printf(" %+.1f%% |\n", 100.0 * (best / first - 1.0));
        else std::printf(" - |\n");
        std::fflush(stdout);
      }
    }
    CHECK(cudaGetLastError());
  }
  return 0;
}

// The TMA kernel over every cluster size and shared-memory padding (an SM's
// shared memory divided by 1-4 blocks, with and without 24 KiB left for the
// kernels around it) on the large shapes at decode rows: every launch to
// `full_log` (tools/cuda/tma_plan_table.py turns it into the kernel's table
// of measured plans), and per shape and M the plan's own launch beside the
// fastest.
int sweep_tma(const std::vector<ShapeCase>& shapes, int iters, int sms, cudaStream_t s, const char* full_log) {
  FILE* log = std::fopen(full_log, "w");
  if (log == nullptr) {
    std::printf("cannot write %s\n", full_log);
    return 1;
  }
  std::printf("| shape | M | planned: C, KiB, %% of copy rate | fastest: C, KiB, %% |\n|---|---:|---|---|\n");
  for (const ShapeCase& sc : shapes) {
    const Fp8Operands o(sc, 32, s);
    for (int M : {1, 8, 16, 24, 32}) {
      if (!hyllm::cuda::fp8_gemv_uses_tma(M, sc.N, sc.K)) continue;
      auto params = [&](int c, int cluster, size_t smem) {
        hyllm::cuda::Fp8GemvParams p;
        p.w = o.w[c];
        p.w_scale = o.wsb;
        p.x = o.x;
        p.x_scale = o.xs;
        p.out = o.out;
        p.M = M;
        p.N = sc.N;
        p.K = sc.K;
        p.tma_cluster = cluster;
        p.tma_smem = smem;
        return p;
      };
      auto pct = [&](double t) { return 100.0 * o.wbytes / t / kCopyBandwidth; };
      const auto plan = hyllm::cuda::fp8_gemv_tma_plan(sc.N, sc.K, M);
      const double planned = time_graph(s, o.copies, iters, [&](int c, cudaStream_t st) {
        hyllm::cuda::launch_fp8_gemv(params(c, 0, 0), sms, st);
      });
      double best = planned;
      int best_c = plan.cluster;
      size_t best_smem = plan.smem_bytes;
      struct Pad {
        int per_sm;  // 0: the kernel's own shared memory
        int headroom_kib;
        size_t bytes;
      };
      std::vector<Pad> pads = {{0, 0, 0}};
      for (int per_sm = 1; per_sm <= 4; ++per_sm)
        for (int headroom : {0, 24})
          pads.push_back({per_sm, headroom, hyllm::cuda::fp8_gemv_tma_padded_smem(per_sm, size_t(headroom) << 10)});
      for (int cluster = 1; cluster <= 8; ++cluster) {
        for (const Pad& padding : pads) {
          const size_t pad = padding.bytes;
          // A launch the GPU cannot hold in one go is refused: try it outside a capture.
          if (!hyllm::cuda::launch_fp8_gemv_tma(params(0, cluster, pad), s)) {
            cudaGetLastError();
            continue;
          }
          CHECK(cudaStreamSynchronize(s));
          const double t = time_graph(s, o.copies, iters, [&](int c, cudaStream_t st) {
            hyllm::cuda::launch_fp8_gemv_tma(params(c, cluster, pad), st);
          });
          std::fprintf(log, "N=%d K=%d M=%d C=%d per_sm=%d headroom=%d pad=%.1fKiB %.2fus %.1f%% %s\n", sc.N, sc.K, M,
                       cluster, padding.per_sm, padding.headroom_kib, pad / 1024.0, t * 1e6, pct(t), sc.name);
          if (t < best) {
            best = t;
            best_c = cluster;
            best_smem = pad;
          }
        }
      }
      // (A padding of 0, or one below the kernel's own, launches with its own.)
      std::printf("| %s | %d | %d, %.0f, %.0f%% | %d, %s, %.0f%% |\n", sc.name, M, plan.cluster,
                  plan.smem_bytes / 1024.0, pct(planned), best_c,
                  best_smem == 0 ? "own" : std::to_string(best_smem / 1024).c_str(), pct(best));
      std::fflush(stdout);
    }
  }
  std::fclose(log);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 50, max_m = 4096;
  bool probe_rows = false;
  const char* sweep_log = nullptr;
  int algo_ranks = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--probe-rows") probe_rows = true;
    if (i + 1 < argc && a == "--sweep-tma") sweep_log = argv[i + 1];
    if (i + 1 < argc && a == "--iters") iters = std::stoi(argv[i + 1]);
    if (i + 1 < argc && a == "--algo-ranks") algo_ranks = std::stoi(argv[i + 1]);
    if (i + 1 < argc && a == "--max-m") max_m = std::stoi(argv[i + 1]);
  }
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  hyllm::cuda::GemmRunner gemm;
  if (probe_rows) return probe_row_counts(gemm, s);
  const std::vector<ShapeCase> shapes = {
      {"27B gdn qkv|z", 16384, 5120}, {"27B attn q|k|v", 14336, 5120}, {"27B mlp gate|up", 34816, 5120},
      {"27B mlp down", 5120, 17408},  {"27B out_proj", 5120, 6144},    {"35B gdn qkv|z", 12288, 2048},
      {"35B attn q|k|v", 9216, 2048}, {"35B out_proj", 2048, 4096},   {"35B shared gate|up", 1024, 2048}};
  if (sweep_log != nullptr) return sweep_tma(shapes, iters, sms, s, sweep_log);
  if (algo_ranks > 0) return sweep_algo_ranks(shapes, algo_ranks, iters, s);
  const std::vector<int> ms = {1, 3, 8, 16, 32, 64, 1024, 4096};
  std::printf("| shape | N x K | M | picked vs tiles | fp8_gemv block (as picked) | fp8_gemv block (register tiles) | "
              "fp8_gemv tensor (as picked) | "
              "cuBLASLt fp8 block | cuBLASLt fp8 tensor | cuBLASLt bf16 |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const ShapeCase& sc : shapes) {
    const Fp8Operands o(sc, 4096, s);
    // The bf16 operands of the cuBLASLt bf16 column.
    std::vector<uint16_t*> w16(o.copies);
    for (int c = 0; c < o.copies; ++c) {
      CHECK(cudaMalloc(&w16[c], o.wbytes * 2));
      fill_codes<<<1024, 256, 0, s>>>(reinterpret_cast<uint8_t*>(w16[c]), o.wbytes * 2, 31u * c + 7);
    }
    uint16_t* x16;
    CHECK(cudaMalloc(&x16, static_cast<size_t>(4096) * sc.K * 2));
    fill_codes<<<1024, 256, 0, s>>>(reinterpret_cast<uint8_t*>(x16), static_cast<size_t>(4096) * sc.K * 2, 98);
    CHECK(cudaStreamSynchronize(s));
    for (int M : ms) {
      if (M > max_m) break;
      const int it = M >= 1024 ? std::max(5, iters / 5) : iters;
      auto cell = [&](double t, bool bf16) {
        if (t <= 0) return std::string("-");
        char buf[96];
        if (M >= 1024)
          std::snprintf(buf, sizeof buf, "%.1f us, %.0f TF/s", t * 1e6, 2.0 * M * sc.N * sc.K / t / 1e12);
        else
          std::snprintf(buf, sizeof buf, "%.1f us, %.0f%%", t * 1e6,
                        100.0 * o.wbytes * (bf16 ? 2 : 1) / t / kCopyBandwidth);
        return std::string(buf);
      };
      double gemv_b = -1, gemv_b_regs = -1, gemv_t = -1, lt_b = -1, lt_t = -1, lt_bf16 = -1;
      // max |picked - tiles| / max |tiles|, block scales, f32 outputs
      double tma_vs_tiles = -1;
      // fp8_gemv on weight copy c, block or per-tensor scales, as launch_fp8_gemv
      // picks (fp8_gemv_uses_tma) or on the register tiles.
      auto gemv = [&](int c, bool block, bool tma, bool out_f32, cudaStream_t st) {
        hyllm::cuda::Fp8GemvParams p;
        p.w = o.w[c];
        p.w_scale = block ? o.wsb : o.wst;
        p.x = o.x;
        p.x_scale = block ? o.xs : o.wst;
        p.block_scales = block;
        p.out = o.out;
        p.out_f32 = out_f32;
        p.M = M;
        p.N = sc.N;
        p.K = sc.K;
        p.use_tma = tma;
        hyllm::cuda::launch_fp8_gemv(p, sms, st);
      };
      if (M <= 64) {
        std::vector<float> res[2];
        for (int variant = 0; variant < 2; ++variant) {
          gemv(0, true, variant == 0, true, s);
          res[variant].resize(static_cast<size_t>(M) * sc.N);
          CHECK(cudaMemcpyAsync(res[variant].data(), o.out, res[variant].size() * 4, cudaMemcpyDeviceToHost, s));
          CHECK(cudaStreamSynchronize(s));
        }
        double diff = 0, ref = 0;
        for (size_t i = 0; i < res[0].size(); ++i) {
          diff = std::max(diff, std::abs(static_cast<double>(res[0][i]) - res[1][i]));
          ref = std::max(ref, std::abs(static_cast<double>(res[1][i])));
        }
        tma_vs_tiles = ref > 0 ? diff / ref : diff;
        for (int variant = 0; variant < 3; ++variant) {
          const bool block = variant < 2, tma = variant != 1;
          double t = time_graph(s, o.copies, it, [&](int c, cudaStream_t st) { gemv(c, block, tma, false, st); });
          (variant == 0 ? gemv_b : variant == 1 ? gemv_b_regs : gemv_t) = t;
        }
      }
      for (bool block : {true, false}) {
        // Plan outside the capture (the heuristic must not run inside it).
        if (!gemm.run_fp8(o.x, block ? o.xs : o.wst, o.w[0], block ? o.wsb : o.wst,
                          block ? hyllm::cuda::GemmRunner::Fp8Scales::kBlock : hyllm::cuda::GemmRunner::Fp8Scales::kTensor,
                          o.out, false, M, sc.N, sc.K, s))
          continue;
        double t = time_graph(s, o.copies, it, [&](int c, cudaStream_t st) {
          gemm.run_fp8(o.x, block ? o.xs : o.wst, o.w[c], block ? o.wsb : o.wst,
                       block ? hyllm::cuda::GemmRunner::Fp8Scales::kBlock : hyllm::cuda::GemmRunner::Fp8Scales::kTensor,
                       o.out, false, M, sc.N, sc.K, st);
        });
        (block ? lt_b : lt_t) = t;
      }
      gemm.run(x16, w16[0], o.out, false, M, sc.N, sc.K, s);
      lt_bf16 = time_graph(s, o.copies, it, [&](int c, cudaStream_t st) { gemm.run(x16, w16[c], o.out, false, M, sc.N, sc.K, st); });
      CHECK(cudaStreamSynchronize(s));
      CHECK(cudaGetLastError());
      std::printf("| %s | %d x %d | %d | %.1e | %s | %s | %s | %s | %s | %s |\n", sc.name, sc.N, sc.K, M, tma_vs_tiles,
                  cell(gemv_b, false).c_str(), cell(gemv_b_regs, false).c_str(), cell(gemv_t, false).c_str(), cell(lt_b, false).c_str(),
                  cell(lt_t, false).c_str(), cell(lt_bf16, true).c_str());
      std::fflush(stdout);
    }
    for (uint16_t* c : w16) cudaFree(c);
    cudaFree(x16);
  }
  // The TMA kernel's launch per shape and row count that it takes.
  std::printf("\n| shape | M | TMA kernel: blocks per 128-row block | shared memory per block |\n|---|---:|---:|---:|\n");
  for (const ShapeCase& sc : shapes) {
    for (int M : ms) {
      if (M > std::min(max_m, hyllm::cuda::kFp8GemvRowsPerPass) || !hyllm::cuda::fp8_gemv_uses_tma(M, sc.N, sc.K))
        continue;
      const auto plan = hyllm::cuda::fp8_gemv_tma_plan(sc.N, sc.K, M);
      std::printf("| %s | %d | %d | %.1f KiB |\n", sc.name, M, plan.cluster, plan.smem_bytes / 1024.0);
    }
  }
  return 0;
}
