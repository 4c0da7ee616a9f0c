#pragma once
// Per-sequence metadata checks of the stateful CPU kernels (GDN conv and delta
// rule): on the CPU the metadata is host memory, so bad indices are reported
// instead of corrupting memory.

#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/ops.h"

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

// One sequence's intermediate-state save (ops.h StateSaveArgs): the state
// after its first `len` tokens goes to `slot` (-1: none).
struct SeqSave {
  int32_t slot = -1;
  int64_t len = 0;
};

// The saves of every sequence, validated: a save slot in [0, num_slots) that
// no non-empty sequence of the call uses and no other save targets, and a
// length in [1, n].
inline std::vector<SeqSave> check_saves(const char* op, const StateSaveArgs& save, const TensorView& query_start_loc,
                                        const TensorView& state_indices, int64_t num_slots) {
  const int64_t S = state_indices.dim(0);
  std::vector<SeqSave> saves(static_cast<size_t>(S));
  if (save.empty()) return saves;
  const int32_t* qsl = query_start_loc.data_as<const int32_t>();
  const int32_t* idx = state_indices.data_as<const int32_t>();
  const int32_t* slots = save.save_slots.data_as<const int32_t>();
  const int32_t* lens = save.save_lens.data_as<const int32_t>();
  std::vector<int32_t> used;
  for (int64_t s = 0; s < S; ++s) {
    if (qsl[s + 1] > qsl[s]) used.push_back(idx[s]);
  }
  for (int64_t s = 0; s < S; ++s) {
    const int64_t n = qsl[s + 1] - qsl[s];
    if (slots[s] < 0 || n == 0) continue;
    if (slots[s] >= num_slots || std::find(used.begin(), used.end(), slots[s]) != used.end()) {
      fail(ErrorCode::kInvalidArgument, "{}: save slot {} of sequence {} is outside [0, {}) or used by the call",
           op, slots[s], s, num_slots);
    }
    if (lens[s] < 1 || lens[s] > n) {
      fail(ErrorCode::kInvalidArgument, "{}: sequence {} saves its state after {} of its {} tokens", op, s, lens[s],
           n);
    }
    saves[static_cast<size_t>(s)] = {slots[s], lens[s]};
    used.push_back(slots[s]);  // two saves into one slot would race
  }
  return saves;
}

}  // namespace hyllm::cpu
