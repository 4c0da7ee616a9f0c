#pragma once
// Per-sequence metadata checks of the stateful CPU kernels (GDN conv and delta
// rule): on the CPU the metadata is host memory, so bad indices are reported
// instead of corrupting memory.

#include "backend/cpu/cpu_common.h"

namespace hyllm::cpu {

// Validates query_start_loc against T and every non-empty sequence's state slot
// against num_slots. Sequences with no tokens are skipped by the kernels.
inline void check_sequences(const char* op, const TensorView& query_start_loc, const TensorView& state_indices,
                            int64_t T, int64_t num_slots) {
  const int64_t S = state_indices.dim(0);
  const int32_t* qsl = query_start_loc.data_as<const int32_t>();
  const int32_t* idx = state_indices.data_as<const int32_t>();
  if (qsl[0] != 0 || qsl[S] != T) {
    fail(ErrorCode::kInvalidArgument, "{}: query_start_loc spans [{}, {}), expected [0, {})", op, qsl[0], qsl[S],
         T);
  }
  for (int64_t s = 0; s < S; ++s) {
    if (qsl[s + 1] < qsl[s]) fail(ErrorCode::kInvalidArgument, "{}: query_start_loc decreases at {}", op, s);
    if (qsl[s + 1] > qsl[s] && (idx[s] < 0 || idx[s] >= num_slots)) {
      fail(ErrorCode::kInvalidArgument, "{}: state slot {} of sequence {} is outside [0, {})", op, idx[s], s,
           num_slots);
    }
  }
}

}  // namespace hyllm::cpu
