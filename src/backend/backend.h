#pragma once
// The device interface. Models and the runner allocate, copy and synchronise
// through it and never see CUDA types. Work is ordered on the backend's one
// compute stream; a host read of device memory must follow synchronize().

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "tensor/tensor.h"

namespace hyllm {

class Kernels;       // backend/kernels.h: the op implementations
class Communicator;  // backend/communicator.h: tensor-parallel collectives

// Host-side counts of what the ops were asked to do, so that tests can check
// that a fast path is the one taken (each FP8 activation quantised once).
struct OpCounters {
  int64_t fp8_quantizations = 0;          // by a producer op or quantize_fp8
  int64_t linear_self_quantizations = 0;  // FP8 linears given a bf16 input
};

struct MemoryInfo {
  size_t total_bytes = 0;
  size_t free_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // "cpu", "cuda:0 (NVIDIA H200)"

  // Raw allocation; alignment at least 256 bytes. Throws kOutOfMemory.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr) = 0;

  // Copies ordered on the compute stream. Host pointers may be pageable.
  virtual void copy_to_device(void* dst, const void* src_host, size_t nbytes) = 0;
  virtual void copy_to_host(void* dst_host, const void* src, size_t nbytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t nbytes) = 0;
  virtual void fill_zero(void* dst, size_t nbytes) = 0;

  // Waits until all queued work is done.
  virtual void synchronize() = 0;
  // Makes the calling thread able to use this backend (CUDA: selects its
  // device). A tensor-parallel rank's thread calls it once before any other
  // call; single-device code never needs it.
  virtual void bind_to_current_thread() {}
  virtual MemoryInfo memory_info() const = 0;

  // Marks on the device's clock, for the runner's step timing:
  // record_mark(i) puts mark i (0 <= i < kNumMarks) on the compute stream
  // behind the work queued so far; mark_elapsed_ms(a, b) is the device time
  // from mark a to mark b, once both are recorded and the stream has reached
  // b (it waits for that). Negative where the backend keeps no device clock:
  // the CPU's work runs in the calling thread, whose wall clock says it all.
  static constexpr int kNumMarks = 4;
  virtual void record_mark(int /*mark*/) {}
  virtual double mark_elapsed_ms(int /*from*/, int /*to*/) { return -1.0; }

  // The backend's op implementations (ops.h validates, then calls these).
  // The default table reports kUnsupported for every op.
  virtual Kernels& kernels();

  OpCounters& counters() { return counters_; }

  // Tensor parallelism: this backend's rank in its group, null when the
  // model runs on this backend alone. Set once, before the model loads.
  Communicator* communicator() const { return communicator_.get(); }
  void set_communicator(std::shared_ptr<Communicator> c) { communicator_ = std::move(c); }

 private:
  OpCounters counters_;
  std::shared_ptr<Communicator> communicator_;
};

// Owning device memory, freed through the backend that made it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, size_t nbytes)
      : backend_(&backend), data_(nbytes ? backend.allocate(nbytes) : nullptr), size_(nbytes) {}
  DeviceBuffer(Backend& backend, DType dtype, Shape shape)
      : DeviceBuffer(backend, static_cast<size_t>(shape.numel()) * dtype_size(dtype)) {
    dtype_ = dtype;
    shape_ = shape;
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = std::exchange(o.backend_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      dtype_ = o.dtype_;
      shape_ = o.shape_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reset() {
    if (data_ != nullptr) backend_->deallocate(data_);
    data_ = nullptr;
    size_ = 0;
  }
  void* data() const { return data_; }
  size_t size() const { return size_; }
  TensorView view() const { return {data_, dtype_, shape_, backend_ ? backend_->device() : Device::cpu()}; }

 private:
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
  DType dtype_ = DType::kU8;
  Shape shape_;
};

}  // namespace hyllm
