// Host code (compiled by the C++ compiler): fmt and spdlog do not build under nvcc,
// so kernels live in .cu files behind plain launch functions and this file owns
// the runtime objects.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/launch/fill.h"

namespace hyllm {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index) : index_(index) {
    HYLLM_CUDA_CHECK(cudaSetDevice(index));
    HYLLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaDeviceProp prop{};
    HYLLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    name_ = std::string("cuda:") + std::to_string(index) + " (" + prop.name + ")";
    kernels_ = std::make_unique<CudaKernels>(stream_, index);
  }
  ~CudaBackend() override {
    kernels_.reset();
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : marks_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    cudaStreamDestroy(stream_);
  }

  Device device() const override { return Device::cuda(index_); }
  std::string name() const override { return name_; }

  void* allocate(size_t nbytes) override {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, nbytes == 0 ? 256 : nbytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      fail(ErrorCode::kOutOfMemory, "cudaMalloc of {} bytes failed: {}", nbytes, cudaGetErrorString(err));
    }
    return p;
  }
  void deallocate(void* ptr) override { cudaFree(ptr); }
  void copy_to_device(void* dst, const void* src, size_t n) override {
    HYLLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_));
  }
  void copy_to_host(void* dst, const void* src, size_t n) override {
    HYLLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_));
    HYLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy_on_device(void* dst, const void* src, size_t n) override {
    HYLLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_));
  }
  void fill_zero(void* dst, size_t n) override { HYLLM_CUDA_CHECK(cudaMemsetAsync(dst, 0, n, stream_)); }
  void synchronize() override { HYLLM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  // The runtime's current device is per thread; everything else this backend
  // holds (stream, cuBLASLt handle, scratch) may be used from any thread that
  // selected its device.
  void bind_to_current_thread() override { HYLLM_CUDA_CHECK(cudaSetDevice(index_)); }
  MemoryInfo memory_info() const override {
    size_t free_b = 0, total_b = 0;
    HYLLM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return {total_b, free_b};
  }
  Kernels& kernels() override { return *kernels_; }

  void record_mark(int mark) override {
    HYLLM_CHECK(mark >= 0 && mark < kNumMarks, "device mark {} out of range", mark);
    if (marks_[mark] == nullptr) HYLLM_CUDA_CHECK(cudaEventCreate(&marks_[mark]));
    HYLLM_CUDA_CHECK(cudaEventRecord(marks_[mark], stream_));
  }
  double mark_elapsed_ms(int from, int to) override {
    HYLLM_CHECK(from >= 0 && from < kNumMarks && to >= 0 && to < kNumMarks, "device marks {}, {} out of range", from,
                to);
    if (marks_[from] == nullptr || marks_[to] == nullptr) return -1.0;
    HYLLM_CUDA_CHECK(cudaEventSynchronize(marks_[to]));
    float ms = 0.0f;
    HYLLM_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[from], marks_[to]));
    return ms;
  }

 private:
  int index_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t marks_[kNumMarks] = {};
  std::string name_;
  std::unique_ptr<CudaKernels> kernels_;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device_index) { return std::make_unique<CudaBackend>(device_index); }

namespace {
class CudaGraphImpl final : public DeviceGraph {
 public:
  // Keeps only the executable graph: it does not depend on its source.
  CudaGraphImpl(const CudaKernels& kernels, cudaGraph_t graph)
      : kernels_(kernels), stream_(kernels.stream()), scratch_generation_(kernels.scratch_generation()) {
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    HYLLM_CUDA_CHECK(err);
  }
  ~CudaGraphImpl() override { cudaGraphExecDestroy(exec_); }
  void replay() override { HYLLM_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }
  bool valid() const override { return kernels_.scratch_generation() == scratch_generation_; }

 private:
  const CudaKernels& kernels_;
  cudaStream_t stream_;
  cudaGraphExec_t exec_ = nullptr;
  uint64_t scratch_generation_;
};
}  // namespace

std::unique_ptr<DeviceGraph> cuda_capture_graph(Backend& be, const std::function<void()>& body) {
  auto* k = dynamic_cast<CudaKernels*>(&be.kernels());
  HYLLM_CHECK(k != nullptr, "cuda_capture_graph needs the cuda backend, got {}", be.name());
  cudaStream_t stream = k->stream();
  HYLLM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(stream, &broken);
    if (broken) cudaGraphDestroy(broken);
    throw;
  }
  cudaGraph_t graph = nullptr;
  HYLLM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  return std::make_unique<CudaGraphImpl>(*k, graph);
}

void cuda_poison_scratch(Backend& be, uint8_t byte) {
  auto* k = dynamic_cast<CudaKernels*>(&be.kernels());
  HYLLM_CHECK(k != nullptr, "cuda_poison_scratch needs the cuda backend, got {}", be.name());
  k->poison_scratch(byte);
}

CudaMoeCounts cuda_moe_counts(Backend& be) {
  auto* k = dynamic_cast<CudaKernels*>(&be.kernels());
  HYLLM_CHECK(k != nullptr, "cuda_moe_counts needs the cuda backend, got {}", be.name());
  return k->moe_counts();
}

void cuda_allow_moe_small_tma(Backend& be, bool allow) {
  auto* k = dynamic_cast<CudaKernels*>(&be.kernels());
  HYLLM_CHECK(k != nullptr, "cuda_allow_moe_small_tma needs the cuda backend, got {}", be.name());
  k->allow_moe_small_tma(allow);
}

void cuda_allow_warpgroup_attention(Backend& be, bool allow) {
  auto* k = dynamic_cast<CudaKernels*>(&be.kernels());
  HYLLM_CHECK(k != nullptr, "cuda_allow_warpgroup_attention needs the cuda backend, got {}", be.name());
  k->allow_warpgroup_attention(allow);
}

void cuda_fill_uniform(Backend& be, void* dst, DType dtype, size_t n, uint64_t seed, float mean, float scale) {
  HYLLM_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, "cuda_fill_uniform: dtype {} is not f32/bf16",
              dtype_name(dtype));
  auto* k = dynamic_cast<CudaKernels*>(&be.kernels());
  HYLLM_CHECK(k != nullptr, "cuda_fill_uniform needs the cuda backend, got {}", be.name());
  cuda::launch_fill_uniform(dst, dtype == DType::kF32, n, seed, mean, scale, k->stream());
  HYLLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace hyllm
