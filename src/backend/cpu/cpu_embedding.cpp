// Embedding lookup and row gather: plain row copies.
#include <cstring>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_kernels.h"

namespace hyllm {

void CpuKernels::embedding(const EmbeddingArgs& a) {
  const int64_t T = a.ids.dim(0), V = a.table.dim(0), H = a.table.dim(1);
  const int32_t* ids = a.ids.data_as<const int32_t>();
  // A part of the vocabulary (tensor parallelism) leaves the other ranks'
  // rows as zeros; the whole table rejects an id it does not hold.
  const int64_t start = a.part_of_vocab ? a.vocab_start : 0;
  if (!a.part_of_vocab) {
    for (int64_t t = 0; t < T; ++t) {
      if (ids[t] < 0 || ids[t] >= V) {
        fail(ErrorCode::kInvalidArgument,
             "embedding: token id {} at position {} is outside the vocabulary [0, {})", ids[t], t, V);
      }
    }
  }
  const size_t row_bytes = static_cast<size_t>(H) * 2;
  const char* table = static_cast<const char*>(a.table.data());
  char* out = static_cast<char*>(a.out.data());
  cpu::parallel(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t row = ids[t] - start;
      if (row >= 0 && row < V) std::memcpy(out + t * row_bytes, table + row * row_bytes, row_bytes);
      else std::memset(out + t * row_bytes, 0, row_bytes);
    }
  });
}

void CpuKernels::gather_rows(const GatherRowsArgs& a) {
  const int64_t T = a.src.dim(0), R = a.indices.dim(0);
  const int32_t* idx = a.indices.data_as<const int32_t>();
  for (int64_t r = 0; r < R; ++r) {
    if (idx[r] < 0 || idx[r] >= T) {
      fail(ErrorCode::kInvalidArgument, "gather_rows: index {} at {} is outside [0, {})", idx[r], r, T);
    }
  }
  const size_t row_bytes = static_cast<size_t>(a.src.dim(1)) * dtype_size(a.src.dtype());
  const char* src = static_cast<const char*>(a.src.data());
  char* out = static_cast<char*>(a.out.data());
  for (int64_t r = 0; r < R; ++r) std::memcpy(out + r * row_bytes, src + idx[r] * row_bytes, row_bytes);
}

}  // namespace hyllm
