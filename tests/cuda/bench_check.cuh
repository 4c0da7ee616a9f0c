#pragma once
// The CUDA benchmarks' check of runtime calls: they compile under nvcc, where
// the backend's HYLLM_CUDA_CHECK (fmt-based hyllm::fail) cannot be included,
// and a failed call ends the run with the call and its location.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)
