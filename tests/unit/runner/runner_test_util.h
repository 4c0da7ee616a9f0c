#pragma once
// What the runner tests share: the embedded model and small capacities.

#include <filesystem>

#include "engine/runner/model_runner.h"
#include "model/model.h"

namespace hyllm::test {

inline std::filesystem::path tiny_model() { return std::filesystem::path(HYLLM_SOURCE_DIR) / "models" / "hyllm-tiny"; }

inline ModelOptions small_model_options() {
  ModelOptions mo;
  mo.max_num_tokens = 256;
  mo.max_num_seqs = 8;
  return mo;
}

inline RunnerOptions small_runner_options() {
  RunnerOptions ro;
  ro.max_num_tokens = 256;
  ro.max_num_seqs = 8;
  ro.max_model_len = 128;
  return ro;
}

}  // namespace hyllm::test
