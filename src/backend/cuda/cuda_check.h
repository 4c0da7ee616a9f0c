#pragma once
// Every CUDA runtime call is checked; a failure becomes hyllm::Error naming the
// call and the location.

#include <cuda_runtime.h>

#include "util/status.h"

#define HYLLM_CUDA_CHECK(expr)                                                                  \
  do {                                                                                          \
    cudaError_t hyllm_err_ = (expr);                                                            \
    if (hyllm_err_ != cudaSuccess) [[unlikely]] {                                               \
      ::hyllm::fail(::hyllm::ErrorCode::kInternal, "{}:{}: {} failed: {}", __FILE__, __LINE__, \
                    #expr, cudaGetErrorString(hyllm_err_));                                     \
    }                                                                                           \
  } while (0)
