#pragma once
// Element-wise float conversion between f32 and bf16 (see launch/dense.h for
// the conventions of these headers): the collectives reduce in f32.

#include <cuda_runtime.h>

#include <cstddef>

namespace hyllm::cuda {

// dst[i] = src[i] for i < n, converted (bf16 rounded to nearest even).
// src and dst are f32 when the flag says so, bf16 otherwise; they must not
// overlap unless they are the same pointer with the same type.
void launch_convert_float(const void* src, bool src_f32, void* dst, bool dst_f32, size_t n, cudaStream_t stream);

}  // namespace hyllm::cuda
