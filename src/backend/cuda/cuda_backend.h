#pragma once
// The CUDA backend's factory. This header is CUDA-free so that apps can
// include it; everything that touches the CUDA runtime stays in this folder.

#include <cstdint>
#include <functional>
#include <memory>

#include "backend/backend.h"
#include "backend/device_graph.h"
#include "backend/device_sampler.h"

namespace hyllm {

// Number of visible CUDA devices; 0 when there is no driver or no GPU.
int cuda_device_count();
std::unique_ptr<Backend> make_cuda_backend(int device_index = 0);

// A CUDA graph of the work one call of `body` enqueued on the backend's
// stream (backend/device_graph.h). The body must be graph-safe: the ops are
// once a warm-up call has sized the scratch and planned the GEMMs, and the
// graph reports itself invalid when the scratch arena moves later.
std::unique_ptr<DeviceGraph> cuda_capture_graph(Backend& cuda_backend, const std::function<void()>& body);

// Fills the kernels' scratch arena (as far as it has grown) with `byte`: the
// op harness poisons it between runs so that a kernel reading scratch it did
// not write fails its check.
void cuda_poison_scratch(Backend& cuda_backend, uint8_t byte);

// Which MoE regime the moe op took, per call (or per chunk), so that tests can
// check that the intended kernels ran.
struct CudaMoeCounts {
  int64_t small = 0;         // fused router + small-batch expert kernels
  int64_t grouped = 0;       // router GEMM + grouped wgmma expert GEMMs
  int64_t chunked = 0;       // calls split into small-regime chunks (no grouped GEMMs for this GPU)
  int64_t small_up_tma = 0;  // small-regime block-FP8 gate|up projections on TMA (launch/moe.h)
};
CudaMoeCounts cuda_moe_counts(Backend& cuda_backend);
// Whether the moe op may take its sm_90a-only small-regime kernels where the
// device has them (true by default): a test turns this off to run the kernels
// other GPUs take on the same cases.
void cuda_allow_moe_small_tma(Backend& cuda_backend, bool allow);
// Whether paged attention may run its prefill tiles on sm_90a's warpgroup
// MMAs where the device has them (true by default): a test turns this off to
// run the warp-MMA form other GPUs take on the same cases.
void cuda_allow_warpgroup_attention(Backend& cuda_backend, bool allow);

// The GPU sampler of a CUDA backend (backend/device_sampler.h).
std::unique_ptr<DeviceSampler> make_cuda_sampler(Backend& cuda_backend);

// Fills n elements (f32 or bf16) of device memory of a CUDA backend with
// uniform values in [mean - scale, mean + scale), deterministic in seed:
// dummy weights made on the device, with no host copy.
void cuda_fill_uniform(Backend& cuda_backend, void* dst, DType dtype, size_t n, uint64_t seed, float mean,
                       float scale);

}  // namespace hyllm
