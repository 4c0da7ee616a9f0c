#pragma once
// BF16 GEMMs through cuBLASLt for the linear op: y[M, N] = x[M, K] W[N, K]^T
// with W used in place as stored (nn.Linear layout is cuBLASLt's "TN" form,
// its fastest on Hopper), fp32 accumulation and bf16 or f32 output. The matmul
// descriptors and the heuristic's algorithm are cached per shape, so a decode
// step after the first one does no planning.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace hyllm::cuda {

class GemmRunner {
 public:
  GemmRunner();
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  void run(const uint16_t* x, const uint16_t* w, void* out, bool out_f32, int64_t M, int64_t N, int64_t K,
           cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(int64_t M, int64_t N, int64_t K, bool out_f32);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Plan> plans_;
};

}  // namespace hyllm::cuda
