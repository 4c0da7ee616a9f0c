#include "model/layers/tensor_parallel.h"

#include "backend/communicator.h"
#include "util/status.h"

namespace hyllm {

TensorParallelGroup TensorParallelGroup::of(const Backend& be) {
  const Communicator* c = be.communicator();
  return c ? TensorParallelGroup{c->rank(), c->size()} : TensorParallelGroup{};
}

TensorView RowParallelSum::reduce(Backend& be, Scratch& s, const TensorView& partial) const {
  if (!split_) return partial;
  if (partial.dtype() == DType::kBF16) {
    all_reduce(be, {partial, partial});
    return partial;
  }
  TensorView out = s.take(DType::kBF16, partial.shape());
  all_reduce(be, {partial, out});
  return out;
}

VocabEmbedding::VocabEmbedding(const Backend& be, const TensorView& table, int64_t vocab_size) : table_(table) {
  const TensorParallelGroup g = TensorParallelGroup::of(be);
  split_ = g.split();
  vocab_start_ = g.rank * table.dim(0);
  HYLLM_CHECK(table.dim(0) * g.size >= vocab_size, "embedding of {} rows x {} ranks for a vocabulary of {}",
              table.dim(0), g.size, vocab_size);
}

void VocabEmbedding::forward(Backend& be, const TensorView& ids, const TensorView& out) const {
  EmbeddingArgs a{ids, table_, out};
  if (split_) {
    a.part_of_vocab = true;
    a.vocab_start = vocab_start_;
  }
  embedding(be, a);
  if (split_) all_reduce(be, {out, out});
}

VocabLmHead::VocabLmHead(const Backend& be, const LinearWeight& weight, int64_t vocab_size) : weight_(weight) {
  const TensorParallelGroup g = TensorParallelGroup::of(be);
  split_ = g.split();
  HYLLM_CHECK(weight.out_features() * g.size >= vocab_size, "lm_head of {} rows x {} ranks for a vocabulary of {}",
              weight.out_features(), g.size, vocab_size);
}

void VocabLmHead::forward(Backend& be, Scratch& s, const TensorView& x, const TensorView& logits) const {
  if (!split_) {
    linear(be, {x, weight_, logits});
    return;
  }
  TensorView part = s.take(DType::kF32, Shape{x.dim(0), weight_.out_features()});
  linear(be, {x, weight_, part, {}, true});
  all_gather_columns(be, {part, logits});
}

size_t VocabLmHead::scratch_bytes(int64_t rows) const {
  return split_ ? Scratch::bytes_for(DType::kF32, rows, weight_.out_features()) : 0;
}

}  // namespace hyllm
