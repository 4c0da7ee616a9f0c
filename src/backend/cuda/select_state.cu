// select_state (ops.h): the speculative rollback of GDN state. Grid =
// (slices of a slot, sequences); a sequence that keeps its live state
// returns at once. 16-byte copies when the slot size and the buffers allow,
// else 2-byte ones (a conv window of an odd channel count).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch/gdn.h"

namespace hyllm::cuda {
namespace {

template <typename Word>
__global__ void select_state_kernel(SelectStateParams p) {
  const int s = blockIdx.y;
  const int keep = p.keep[s];
  const int64_t slot = p.state_indices[s];
  if (keep < 0 || keep >= p.spec_k || slot < 0 || slot >= p.num_slots) return;
  const int64_t words = p.slot_bytes / static_cast<int64_t>(sizeof(Word));
  const Word* src = static_cast<const Word*>(p.saved) + (slot * p.spec_k + keep) * words;
  Word* dst = static_cast<Word*>(p.live) + slot * words;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

void launch_select_state(const SelectStateParams& p, cudaStream_t stream) {
  if (p.num_seqs == 0 || p.slot_bytes == 0) return;
  const bool wide = p.slot_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(p.live) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(p.saved) % 16 == 0;
  const int threads = 256;
  const int64_t words = wide ? p.slot_bytes / 16 : p.slot_bytes / 2;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>(ceil_div(words, threads), 256)), p.num_seqs);
  if (wide) {
    select_state_kernel<uint4><<<grid, threads, 0, stream>>>(p);
  } else {
    select_state_kernel<uint16_t><<<grid, threads, 0, stream>>>(p);
  }
}

}  // namespace hyllm::cuda
