#pragma once
// HYLLM_HD marks a function that host code and CUDA device code share: nvcc
// compiles it for both, and any other compiler sees a plain inline function.
// Such a function uses only what both sides have (no host library calls).

#if defined(__CUDACC__)
#define HYLLM_HD __host__ __device__ __forceinline__
#else
#define HYLLM_HD inline
#endif
