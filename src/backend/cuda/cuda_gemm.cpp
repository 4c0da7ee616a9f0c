#include "backend/cuda/cuda_gemm.h"

#include "backend/cuda/cuda_check.h"

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
}  // namespace

GemmRunner::GemmRunner() {
  HYLLM_CUBLAS_CHECK(cublasLtCreate(&handle_));
  HYLLM_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspace_bytes_ = kWorkspaceBytes;
}

GemmRunner::~GemmRunner() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

const GemmRunner::Plan& GemmRunner::plan(int64_t M, int64_t N, int64_t K, bool out_f32) {
  const auto key = std::make_tuple(M, N, K, out_f32);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  HYLLM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
  HYLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
  // Column-major view: A = W as K x N (ld K), transposed; B = x as K x M (ld K);
  // C = y as N x M (ld N), which is y[M, N] row-major.
  HYLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, K, N, K));
  HYLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, K, M, K));
  HYLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out_f32 ? CUDA_R_32F : CUDA_R_16BF, N, M, N));
  cublasLtMatmulPreference_t pref = nullptr;
  HYLLM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  HYLLM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
    fail(ErrorCode::kUnsupported, "cuBLASLt has no bf16 algorithm for M={} N={} K={} ({} out)", M, N, K,
         out_f32 ? "f32" : "bf16");
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void GemmRunner::run(const uint16_t* x, const uint16_t* w, void* out, bool out_f32, int64_t M, int64_t N, int64_t K,
                     cudaStream_t stream) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    HYLLM_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(M * N) * (out_f32 ? 4 : 2), stream));
    return;
  }
  const Plan& p = plan(M, N, K, out_f32);
  const float alpha = 1.0f, beta = 0.0f;
  HYLLM_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, out, p.c, out, p.c, &p.algo,
                                    workspace_, workspace_bytes_, stream));
}

}  // namespace hyllm::cuda
