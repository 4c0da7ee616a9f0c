#pragma once
// GEMMs through cuBLASLt for the linear op: y[M, N] = x[M, K] W[N, K]^T with W
// used in place as stored (nn.Linear layout is cuBLASLt's "TN" form, its
// fastest on Hopper and the only one it offers for FP8), fp32 accumulation and
// bf16 or f32 output. BF16 operands, or e4m3 operands with either per-tensor
// scales or Qwen's block scales (128x128 on the weights as the checkpoint
// stores them, one per token per 128 columns on the activations, group-major).
// The matmul descriptors and the heuristic's algorithm are cached per shape,
// so a decode step after the first one does no planning. The cache holds the
// kMaxPlans most recently used shapes: prefill steps bring a new token count
// M almost every step, and a server must not keep a plan for each forever.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <tuple>

#include "util/lru_map.h"

namespace hyllm::cuda {

class GemmRunner {
 public:
  // algo_rank: which of the heuristic's answers for a shape the plans take,
  // 0 for its first choice (the engine's); bench_cuda_gemm --algo-ranks
  // times the others. A shape with no answer of that rank has no plan.
  explicit GemmRunner(int algo_rank = 0);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  void run(const uint16_t* x, const uint16_t* w, void* out, bool out_f32, int64_t M, int64_t N, int64_t K,
           cudaStream_t stream);

  enum class Fp8Scales { kTensor, kBlock };
  // The FP8 product with device scale pointers (per-tensor: one float each;
  // block: w_scale [ceil(N/128), ceil(K/128)], x_scale [ceil(K/128), M]).
  // Returns false when cuBLASLt has no algorithm for the shape (it has none
  // for block scales below M = 4) or is not trusted with it (see run_fp8),
  // so that the caller can take another kernel.
  bool run_fp8(const uint8_t* x, const float* x_scale, const uint8_t* w, const float* w_scale, Fp8Scales scales,
               void* out, bool out_f32, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
  // The shapes run_fp8 takes block scales for at all: the ones the op
  // harness showed cuBLASLt's block-scaled kernels right on, N and K
  // multiples of 128 and K at least 512 (every real checkpoint's).
  static bool block_shape_trusted(int64_t N, int64_t K) { return N % 128 == 0 && K % 128 == 0 && K >= 512; }

  // Plans kept: every shape of a decode step at every capture size fits (a
  // few GEMM shapes per layer kind x 51 sizes), so the steady state of
  // replayed decode steps and recurring prefill sizes plans nothing.
  static constexpr size_t kMaxPlans = 1024;
  size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // Operand kinds of a plan: BF16, or FP8 with one of the scale layouts.
  enum class Kind { kBf16, kFp8Tensor, kFp8Block };
  // The cached plan, or nullptr when cuBLASLt has no algorithm for it.
  const Plan* plan(Kind kind, int64_t M, int64_t N, int64_t K, bool out_f32);
  static void destroy(Plan& p);

  // The heuristic's cost on the host, logged at debug level: a prefill step
  // with a new row count plans each of its GEMM shapes before enqueueing it.
  uint64_t heuristic_queries_ = 0;
  double heuristic_ms_ = 0.0;

  int algo_rank_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  // A plan without a descriptor: cuBLASLt has no algorithm for the shape.
  LruMap<std::tuple<Kind, int64_t, int64_t, int64_t, bool>, Plan> plans_{kMaxPlans};
};

}  // namespace hyllm::cuda
