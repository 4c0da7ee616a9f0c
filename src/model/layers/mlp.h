#pragma once
// SwiGLU MLP: down(silu(gate(x)) * up(x)) with gate and up merged into one
// GEMM. Block-FP8 gate/up whose width is not a multiple of 128 are padded with
// zero rows to the next multiple (and down_proj with zero columns), which
// leaves every output exactly as unpadded.

#include <string>

#include "model/layers/linear.h"
#include "model/layers/tensor_parallel.h"

namespace hyllm {

class Mlp {
 public:
  // `prefix`: "layers.3.mlp" or "layers.3.mlp.shared_expert".
  static Mlp load(WeightLoader& w, const std::string& prefix);

  InputNeeds input_needs() const { return gate_up_.input_needs(); }
  TensorView forward(Backend& be, Scratch& s, const LayerInput& in) const;
  size_t scratch_bytes(int64_t tokens) const;

 private:
  Linear gate_up_;
  Linear down_;
  RowParallelSum down_sum_;  // down_proj is row-parallel under tensor parallelism
  int64_t width_ = 0;  // intermediate size, padding included
  int64_t hidden_ = 0;
};

}  // namespace hyllm
