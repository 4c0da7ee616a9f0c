#pragma once
// NCCL, loaded when the first communicator is made rather than linked: a
// single-GPU deployment (every deployment without --tensor-parallel-size)
// then runs on hosts without NCCL, and the binary does not carry a
// dependency on its 200 MB library. Only the functions hyllm calls.

#include <nccl.h>

namespace hyllm::cuda {

struct NcclLibrary {
  decltype(&::ncclCommInitAll) CommInitAll = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
};

// libnccl.so.2 (or libnccl.so) from the dynamic loader's search path, loaded
// once; kUnavailable saying how to provide it when it is not there.
const NcclLibrary& nccl();

}  // namespace hyllm::cuda
