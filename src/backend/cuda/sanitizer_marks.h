#pragma once
// Telling a memory checker about device writes it cannot see.
//
// compute-sanitizer's initcheck tracks which bytes of device memory have been
// written by watching every store of the kernels it patches. cuBLASLt's Hopper
// GEMM kernels store their output through the tensor memory accelerator (TMA),
// which the tool does not see: every later read of such an output (by a hyllm
// kernel, or a copy to the host) is reported as a read of uninitialized memory
// although the values are right. mark_device_writes tells the tool, through
// NVTX's memory extension, that a range was written on a stream.
//
// Without a tool attached the call is a cheap no-op: NVTX is header-only and
// the call checks one function pointer (the tool's library is loaded only when
// NVTX_INJECTION64_PATH names one, which compute-sanitizer sets when run with
// --nvtx true).
//
// Invariant: mark only ranges that the work queued before it on the stream
// writes completely. A mark hides every later "uninitialized" report for the
// range, so marking bytes nothing writes would hide real bugs.

#include <cuda_runtime.h>

#include <cstddef>

namespace hyllm::cuda {

// [ptr, ptr + bytes) is written in full by the work already queued on stream.
void mark_device_writes(void* ptr, size_t bytes, cudaStream_t stream);

}  // namespace hyllm::cuda
