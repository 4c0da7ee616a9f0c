#include "backend/cuda/cuda_gemm.h"

#include <chrono>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/sanitizer_marks.h"
#include "util/log.h"

#define HYLLM_CUBLAS_CHECK(expr)                                                                    \
  do {                                                                                              \
    cublasStatus_t hyllm_st_ = (expr);                                                              \
    if (hyllm_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                                          \
      ::hyllm::fail(::hyllm::ErrorCode::kInternal, "{}:{}: {} failed: status {}", __FILE__, __LINE__, \
                    #expr, static_cast<int>(hyllm_st_));                                           \
    }                                                                                               \
  } while (0)

namespace hyllm::cuda {

namespace {
// cuBLASLt's recommended workspace on Hopper.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// A matmul's output, y[M, N] row-major (the column-major N x M matrix with
// ld N of plan()), is written in full and has no pitch gaps: M * N elements
// from out. cuBLASLt's Hopper kernels store it through TMA, which
// compute-sanitizer's initcheck does not see (sanitizer_marks.h).
void mark_output(void* out, bool out_f32, int64_t M, int64_t N, cudaStream_t stream) {
  mark_device_writes(out, static_cast<size_t>(M) * static_cast<size_t>(N) * (out_f32 ? 4 : 2), stream);
}
}  // namespace

GemmRunner::GemmRunner(int algo_rank) : algo_rank_(algo_rank) {
  // cuBLASLt keeps its own process-wide cache of heuristic answers (8,192
  // shapes by default), which a server's ever-new prefill row counts fill
  // over hours; the plan LRU here is the cache, so cuBLASLt's is turned off
  // (a setting only: a library that refuses it still computes correctly).
  static_cast<void>(cublasLtHeuristicsCacheSetCapacity(0));
  HYLLM_CUBLAS_CHECK(cublasLtCreate(&handle_));
  HYLLM_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspace_bytes_ = kWorkspaceBytes;
  // The workspace is cuBLASLt's private scratch: its split-K kernels write
  // partial sums there through TMA and its reduction kernel reads them back.
  // The tool sees none of those writes and hyllm never reads the workspace, so
  // it is the one range marked without a write queued before the mark (an
  // exception to sanitizer_marks.h's invariant, for memory hyllm does not use).
  mark_device_writes(workspace_, kWorkspaceBytes, nullptr);
}

GemmRunner::~GemmRunner() {
  plans_.for_each([](const auto&, Plan& p) { destroy(p); });
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// Destroying the descriptors of a plan whose matmuls are still queued, or
// recorded in a device graph, is safe: cublasLtMatmul reads the descriptors
// and the algorithm on the host when it enqueues the kernels and bakes what
// they say into the launches, so neither a queued kernel nor a graph node
// points back at them. The cuBLASLt reference does not spell this out;
// PyTorch relies on it (its cuBLASLt GEMMs create the descriptors per call
// and destroy them on return, also while a CUDA graph captures), and so does
// run_fp8 here, which rewrites a cached descriptor's scale pointers after
// earlier graphs recorded matmuls through it.
void GemmRunner::destroy(Plan& p) {
  if (p.desc == nullptr) return;
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.c);
  cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

const GemmRunner::Plan* GemmRunner::plan(Kind kind, int64_t M, int64_t N, int64_t K, bool out_f32) {
  const auto key = std::make_tuple(kind, M, N, K, out_f32);
  if (const Plan* cached = plans_.find(key)) return cached->desc ? cached : nullptr;
  // Past capacity the least recently used plan goes (see destroy()).
  auto remember = [&](const Plan& p) -> Plan& {
    if (auto evicted = plans_.insert(key, p)) destroy(evicted->second);
    return plans_.front();
  };
  Plan p;
  HYLLM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
  HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
  if (kind != Kind::kBf16) {
    // The heuristic turns block-scaled modes down without scale pointers; the
    // real ones are set for each call (run_fp8).
    const void* placeholder = workspace_;
    HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder,
                                                      sizeof(placeholder)));
    HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder,
                                                      sizeof(placeholder)));
  }
  if (kind == Kind::kFp8Block) {
    const int32_t w_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const int32_t x_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &w_mode, sizeof(w_mode)));
    HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &x_mode, sizeof(x_mode)));
  }
  // Column-major view: A = W as K x N (ld K), transposed; B = x as K x M (ld K);
  // C = y as N x M (ld N), which is y[M, N] row-major.
  const cudaDataType_t in = kind == Kind::kBf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  HYLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, in, K, N, K));
  HYLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, in, K, M, K));
  HYLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out_f32 ? CUDA_R_32F : CUDA_R_16BF, N, M, N));
  cublasLtMatmulPreference_t pref = nullptr;
  HYLLM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  HYLLM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace_bytes_, sizeof(workspace_bytes_)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(algo_rank_) + 1);
  int found = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref,
                                                           static_cast<int>(results.size()), results.data(), &found);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  cublasLtMatmulPreferenceDestroy(pref);
  heuristic_ms_ += ms;
  if (++heuristic_queries_ % 256 == 1) {
    static constexpr const char* kKindNames[] = {"bf16", "fp8 per-tensor", "fp8 block"};
    log::debug("cuBLASLt: {} heuristic queries, {:.1f} ms in all; the last ({}, M={} N={} K={}) took {:.3f} ms",
               heuristic_queries_, heuristic_ms_, kKindNames[static_cast<int>(kind)], M, N, K, ms);
  }
  if (st != CUBLAS_STATUS_SUCCESS || found <= algo_rank_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
    remember(Plan{});  // remembered: the heuristic is not asked again
    return nullptr;
  }
  p.algo = results[static_cast<size_t>(algo_rank_)].algo;
  return &remember(p);
}

void GemmRunner::run(const uint16_t* x, const uint16_t* w, void* out, bool out_f32, int64_t M, int64_t N, int64_t K,
                     cudaStream_t stream) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    HYLLM_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(M * N) * (out_f32 ? 4 : 2), stream));
    return;
  }
  const Plan* p = plan(Kind::kBf16, M, N, K, out_f32);
  if (p == nullptr) {
    fail(ErrorCode::kUnsupported, "cuBLASLt has no bf16 algorithm for M={} N={} K={} ({} out)", M, N, K,
         out_f32 ? "f32" : "bf16");
  }
  const float alpha = 1.0f, beta = 0.0f;
  HYLLM_CUBLAS_CHECK(cublasLtMatmul(handle_, p->desc, &alpha, w, p->a, x, p->b, &beta, out, p->c, out, p->c, &p->algo,
                                    workspace_, workspace_bytes_, stream));
  mark_output(out, out_f32, M, N, stream);
}

bool GemmRunner::run_fp8(const uint8_t* x, const float* x_scale, const uint8_t* w, const float* w_scale,
                         Fp8Scales scales, void* out, bool out_f32, int64_t M, int64_t N, int64_t K,
                         cudaStream_t stream) {
  if (M == 0 || N == 0) return true;
  // The other block-scaled shapes go to the caller's kernel.
  if (scales == Fp8Scales::kBlock && !block_shape_trusted(N, K)) return false;
  const Plan* p = plan(scales == Fp8Scales::kBlock ? Kind::kFp8Block : Kind::kFp8Tensor, M, N, K, out_f32);
  if (p == nullptr) return false;
  // The scale pointers belong to this call; setting them on the cached
  // descriptor is a host-side write that the enqueued matmul captures.
  HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                                    sizeof(w_scale)));
  HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale,
                                                    sizeof(x_scale)));
  const float alpha = 1.0f, beta = 0.0f;
  HYLLM_CUBLAS_CHECK(cublasLtMatmul(handle_, p->desc, &alpha, w, p->a, x, p->b, &beta, out, p->c, out, p->c, &p->algo,
                                    workspace_, workspace_bytes_, stream));
  mark_output(out, out_f32, M, N, stream);
  return true;
}

}  // namespace hyllm::cuda
