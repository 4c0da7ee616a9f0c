#pragma once
// TMA descriptors (CUtensorMap) for the kernels that stream operands with the
// tensor memory accelerator. The driver's encoder is reached through the
// runtime's entry-point query, so the backend links no libcuda.

#include <cuda.h>

#include <cstdint>

namespace hyllm::cuda {

// A 2-D map of a row-major [rows, cols] byte matrix whose boxes are box_rows
// x box_cols bytes, stored in shared memory with the 128-byte swizzle (16-byte
// chunk c of box row r lands at chunk c ^ (r % 8); box_cols must be 128).
// Reads past the matrix fill zeros. False when TMA cannot address the matrix
// (base not 16-byte aligned, row pitch not a multiple of 16, no driver entry
// point): the caller takes a kernel that needs no map.
bool encode_swizzled_byte_map(CUtensorMap* map, const void* base, int64_t rows, int64_t cols, int box_rows,
                              int box_cols);

}  // namespace hyllm::cuda
