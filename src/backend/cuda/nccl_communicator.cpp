// NCCL communicators made together by ncclCommInitAll, one per GPU of this
// process. all_reduce sums in f32 whatever x's dtype (a bf16 x is widened
// first, so the sum is rounded once, into out); all_gather_columns gathers
// whole blocks into scratch and copies each rank's block into its columns.
//
// abort() may come from any thread while rank threads use their comms, so
// each rank's enqueues hold that rank's mutex and abort() takes them in turn:
// a comm is never aborted (freed) under a running enqueue. An enqueue does not
// wait for peers (connections are made at init, util/env.h), so it holds the
// mutex only briefly.
#include "backend/cuda/nccl_communicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/launch/convert.h"
#include "backend/cuda/nccl_library.h"
#include "util/env.h"

namespace hyllm {
namespace {

#define HYLLM_NCCL_CHECK(expr)                                                                             \
  do {                                                                                                     \
    ncclResult_t hyllm_nccl_ = (expr);                                                                     \
    if (hyllm_nccl_ != ncclSuccess) [[unlikely]] {                                                         \
      ::hyllm::fail(::hyllm::ErrorCode::kInternal, "{}:{}: {} failed: {}", __FILE__, __LINE__, #expr,      \
                    cuda::nccl().GetErrorString(hyllm_nccl_));                                                      \
    }                                                                                                      \
  } while (0)

class NcclGroup {
 public:
  explicit NcclGroup(const std::vector<int>& devices) : comms_(devices.size()), locks_(devices.size()) {
    set_nccl_defaults();
    HYLLM_NCCL_CHECK(cuda::nccl().CommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data()));
  }
  ~NcclGroup() {
    if (aborted_.load()) return;
    // Finalising is collective: the comms of this one thread finalise as a group.
    cuda::nccl().GroupStart();
    for (ncclComm_t c : comms_) cuda::nccl().CommFinalize(c);
    cuda::nccl().GroupEnd();
    for (ncclComm_t c : comms_) cuda::nccl().CommDestroy(c);
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const { return static_cast<int>(comms_.size()); }

  // Runs enqueue(comm) under rank's lock unless the group was aborted.
  template <typename Enqueue>
  void with_comm(int rank, Enqueue enqueue) {
    std::lock_guard lk(locks_[static_cast<size_t>(rank)]);
    if (aborted_.load()) fail(ErrorCode::kInternal, "tensor parallelism: the NCCL communicator group was aborted");
    enqueue(comms_[static_cast<size_t>(rank)]);
  }

  void abort() {
    aborted_.store(true);
    int device = -1;
    const bool had_device = cudaGetDevice(&device) == cudaSuccess;
    for (size_t r = 0; r < comms_.size(); ++r) {
      std::lock_guard lk(locks_[r]);
      if (comms_[r] == nullptr) continue;
      cuda::nccl().CommAbort(comms_[r]);
      comms_[r] = nullptr;
    }
    if (had_device) cudaSetDevice(device);
  }

 private:
  std::vector<ncclComm_t> comms_;
  std::vector<std::mutex> locks_;
  std::atomic<bool> aborted_{false};
};

ncclDataType_t nccl_type(DType d) { return d == DType::kF32 ? ncclFloat32 : ncclBfloat16; }

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclGroup> group, int rank, CudaKernels& kernels)
      : group_(std::move(group)), rank_(rank), kernels_(kernels) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  void all_reduce(const TensorView& x, const TensorView& out) override {
    const size_t n = static_cast<size_t>(x.numel());
    const bool x_f32 = x.dtype() == DType::kF32, out_f32 = out.dtype() == DType::kF32;
    cudaStream_t stream = kernels_.stream();
    // The f32 buffer reduced in place: out itself when it is f32 (then it is
    // not x unless x is f32 too), else scratch.
    float* sum = out_f32 ? out.data_as<float>() : nullptr;
    if (sum == nullptr && n > 0) sum = static_cast<float*>(kernels_.scratch(n * sizeof(float)));
    group_->with_comm(rank_, [&](ncclComm_t comm) {
      if (n == 0) return;
      if (x_f32) {
        HYLLM_NCCL_CHECK(cuda::nccl().AllReduce(x.data(), sum, n, ncclFloat32, ncclSum, comm, stream));
      } else {
        cuda::launch_convert_float(x.data(), false, sum, true, n, stream);
        cuda_detail::check_launch("all_reduce");
        HYLLM_NCCL_CHECK(cuda::nccl().AllReduce(sum, sum, n, ncclFloat32, ncclSum, comm, stream));
      }
    });
    if (n > 0 && !out_f32) {
      cuda::launch_convert_float(sum, true, out.data(), false, n, stream);
      cuda_detail::check_launch("all_reduce");
    }
  }

  void all_gather_columns(const TensorView& x, const TensorView& out) override {
    const int64_t R = x.dim(0), w = x.dim(1), N = out.dim(1);
    const size_t elem = dtype_size(x.dtype()), block = static_cast<size_t>(R * w);
    cudaStream_t stream = kernels_.stream();
    // One row: the blocks lie side by side in out already, unless cut.
    const bool direct = R == 1 && N == size() * w;
    char* staging = nullptr;
    if (!direct && block > 0) staging = static_cast<char*>(kernels_.scratch(block * elem * size()));
    group_->with_comm(rank_, [&](ncclComm_t comm) {
      if (block == 0) return;
      HYLLM_NCCL_CHECK(
          cuda::nccl().AllGather(x.data(), direct ? out.data() : staging, block, nccl_type(x.dtype()), comm, stream));
    });
    if (direct || block == 0 || N == 0) return;
    for (int q = 0; q < size(); ++q) {
      const int64_t first = q * w, cols = std::min(w, N - first);
      if (cols <= 0) break;
      HYLLM_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(out.data()) + first * elem, N * elem,
                                         staging + q * block * elem, w * elem, cols * elem, R,
                                         cudaMemcpyDeviceToDevice, stream));
    }
  }

  void abort() override { group_->abort(); }

 private:
  std::shared_ptr<NcclGroup> group_;
  const int rank_;
  CudaKernels& kernels_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_nccl_communicators(const std::vector<Backend*>& cuda_backends) {
  if (cuda_backends.empty()) fail(ErrorCode::kInvalidArgument, "NCCL: no backends to connect");
  std::vector<int> devices;
  std::vector<CudaKernels*> kernels;
  for (Backend* be : cuda_backends) {
    auto* k = be == nullptr ? nullptr : dynamic_cast<CudaKernels*>(&be->kernels());
    if (k == nullptr) fail(ErrorCode::kInvalidArgument, "NCCL: rank {} is not a CUDA backend", devices.size());
    devices.push_back(be->device().index);
    kernels.push_back(k);
  }
  if (std::set<int>(devices.begin(), devices.end()).size() != devices.size())
    fail(ErrorCode::kInvalidArgument, "NCCL: each rank needs its own GPU, got two ranks on one device");
  auto group = std::make_shared<NcclGroup>(devices);
  std::vector<std::shared_ptr<Communicator>> comms;
  for (size_t r = 0; r < devices.size(); ++r)
    comms.push_back(std::make_shared<NcclCommunicator>(group, static_cast<int>(r), *kernels[r]));
  return comms;
}

}  // namespace hyllm
