#pragma once
// The layer side of tensor parallelism (model/loader/tensor_parallel.h cuts
// the weights): the sum that ends a row-parallel projection, and the
// vocabulary-parallel embedding and lm_head. A model on a backend without a
// communicator (or a group of one) gets the plain single-device behaviour
// from every class here, with no extra op.

#include "backend/backend.h"
#include "backend/ops.h"
#include "model/layers/scratch.h"

namespace hyllm {

// The group the backend belongs to: {0, 1} without a communicator.
struct TensorParallelGroup {
  int rank = 0;
  int size = 1;
  static TensorParallelGroup of(const Backend& be);
  bool split() const { return size > 1; }
};

// A row-parallel projection (o_proj, out_proj, down_proj) gives each rank a
// partial sum over its slice of the input columns. Alone, the projection
// writes its bf16 result directly. Split, it writes the partial in f32 and
// the ranks' partials are added in fp32 and rounded once, so the result is
// the unsplit projection's up to the order of the fp32 additions.
class RowParallelSum {
 public:
  RowParallelSum() = default;
  explicit RowParallelSum(const Backend& be) : split_(TensorParallelGroup::of(be).split()) {}

  DType partial_dtype() const { return split_ ? DType::kF32 : DType::kBF16; }
  // The bf16 sum over the ranks (in scratch), or `partial` itself alone. A
  // bf16 partial (an op that rounds its own output, e.g. moe) is summed in place.
  TensorView reduce(Backend& be, Scratch& s, const TensorView& partial) const;
  // Scratch reduce() takes for [rows, width] partials, besides the partial.
  size_t scratch_bytes(int64_t rows, int64_t width) const {
    return split_ ? Scratch::bytes_for(DType::kBF16, rows, width) : 0;
  }

 private:
  bool split_ = false;
};

// embed_tokens, whole or this rank's rows of the vocabulary (the others
// contribute zeros, and the sum over the ranks is every token's row).
class VocabEmbedding {
 public:
  VocabEmbedding() = default;
  VocabEmbedding(const Backend& be, const TensorView& table, int64_t vocab_size);

  // out [T, H] bf16.
  void forward(Backend& be, const TensorView& ids, const TensorView& out) const;

 private:
  TensorView table_;
  int64_t vocab_start_ = 0;
  bool split_ = false;
};

// lm_head, whole or this rank's rows of the vocabulary: the ranks' logits are
// gathered side by side into the whole [R, V] on every rank.
class VocabLmHead {
 public:
  VocabLmHead() = default;
  VocabLmHead(const Backend& be, const LinearWeight& weight, int64_t vocab_size);

  // x [R, H] bf16 -> logits [R, V] f32.
  void forward(Backend& be, Scratch& s, const TensorView& x, const TensorView& logits) const;
  size_t scratch_bytes(int64_t rows) const;

 private:
  LinearWeight weight_;
  bool split_ = false;
};

}  // namespace hyllm
