#pragma once
// Tensor parallelism: the ranks of one model, one backend each, exchange
// tensors through a Communicator. Each rank's Backend holds its rank's
// communicator (Backend::communicator()); the collective ops of ops.h
// (all_reduce, all_gather_columns) validate and then call it.
//
// Every rank must make the same sequence of collective calls with the same
// shapes and dtypes (the CPU communicator checks and then fails on every rank
// with kInvalidArgument; NCCL cannot check, and would hang or misread); a call
// returns on a rank once that rank's output is ready to be read in stream
// order (on a GPU: enqueued on the backend's stream; on the CPU: written).
// Implementations:
//  - make_cpu_communicators (backend/cpu): ranks are threads of one process
//    sharing host memory; what the CPU backend runs in CI;
//  - make_nccl_communicators (backend/cuda): NCCL over the GPUs of one host.

#include <cstdint>

#include "tensor/tensor.h"

namespace hyllm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // See ops.h all_reduce / all_gather_columns; arguments already validated.
  virtual void all_reduce(const TensorView& x, const TensorView& out) = 0;
  virtual void all_gather_columns(const TensorView& x, const TensorView& out) = 0;

  // After one rank failed mid-step, the others may wait in a collective for
  // it forever: abort() (callable from any thread, on any rank's
  // communicator) makes every waiting and every later collective of the
  // whole group throw kInternal instead. The group is unusable afterwards.
  // On a GPU the waiting is the device's: abort ends the collective kernels
  // that wait, so the rank's stream drains, and its next call throws.
  virtual void abort() = 0;
};

}  // namespace hyllm
