#include "backend/cuda/sanitizer_marks.h"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>
#include <nvtx3/nvToolsExtMemCudaRt.h>

namespace hyllm::cuda {

namespace {
nvtxDomainHandle_t domain() {
  // Created on first use (thread-safe); a no-op handle without a tool.
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("hyllm");
  return d;
}
}  // namespace

void mark_device_writes(void* ptr, size_t bytes, cudaStream_t stream) {
  if (ptr == nullptr || bytes == 0) return;
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = ptr;
  range.size = bytes;
  nvtxMemMarkInitializedBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = 1;
  batch.regionDescElementSize = sizeof(range);
  batch.regionDescElements = &range;
  nvtxMemCudaMarkInitialized(domain(), stream, /*isPerThreadStream=*/0, &batch);
}

}  // namespace hyllm::cuda
