// Validation and dispatch of the collectives (tensor parallelism) to the
// backend's communicator. Whether the ranks agree on shapes is the
// communicator's to check: one rank sees only its own arguments here.
#include <cstdint>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "backend/ops.h"
#include "backend/ops_check.h"

namespace hyllm {

using ops_detail::kAny;
using ops_detail::OpCheck;

namespace {

Communicator& communicator_of(Backend& be, const OpCheck& c) {
  Communicator* comm = be.communicator();
  c.require(comm != nullptr, "tensor parallelism is off: backend {} has no communicator", be.name());
  return *comm;
}

// Whether the byte ranges of two tensors overlap.
bool overlap(const TensorView& a, const TensorView& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a.data()), b0 = reinterpret_cast<uintptr_t>(b.data());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

}  // namespace

void all_reduce(Backend& be, const AllReduceArgs& a) {
  OpCheck c(be.device(), "all_reduce");
  Communicator& comm = communicator_of(be, c);
  c.tensor("x", a.x, {DType::kBF16, DType::kF32}, {kAny, kAny});
  c.tensor("out", a.out, {DType::kBF16, DType::kF32}, {a.x.dim(0), a.x.dim(1)});
  // In place means out is x itself; a partial overlap (or x read as one
  // dtype and written as another) would let an output clobber input that
  // another element still needs.
  const bool in_place = a.out.data() == a.x.data() && a.out.dtype() == a.x.dtype();
  c.require(in_place || !overlap(a.x, a.out), "out overlaps x without being x itself");
  comm.all_reduce(a.x, a.out);
}

void all_gather_columns(Backend& be, const AllGatherColumnsArgs& a) {
  OpCheck c(be.device(), "all_gather_columns");
  Communicator& comm = communicator_of(be, c);
  c.tensor("x", a.x, {DType::kBF16, DType::kF32}, {kAny, kAny});
  const int64_t R = a.x.dim(0), w = a.x.dim(1), ranks = comm.size();
  c.tensor("out", a.out, {a.x.dtype()}, {R, kAny});
  c.require(a.out.dim(1) <= ranks * w, "out has {} columns, more than {} ranks x {} columns of x", a.out.dim(1),
            ranks, w);
  c.require(!overlap(a.x, a.out), "out must not overlap x");
  comm.all_gather_columns(a.x, a.out);
}

}  // namespace hyllm
