#pragma once
// Owning, 64-byte aligned host memory, optionally typed as a tensor.

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tensor/tensor.h"

namespace hyllm {

class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t nbytes) : size_(nbytes) {
    if (nbytes == 0) return;
    data_ = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (data_ == nullptr) fail(ErrorCode::kOutOfMemory, "host allocation of {} bytes failed", nbytes);
  }
  // A zero-filled buffer holding a tensor of the given type and shape.
  HostBuffer(DType dtype, Shape shape) : HostBuffer(static_cast<size_t>(shape.numel()) * dtype_size(dtype)) {
    dtype_ = dtype;
    shape_ = shape;
    if (data_) std::memset(data_, 0, size_);
  }
  ~HostBuffer() { std::free(data_); }
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      dtype_ = o.dtype_;
      shape_ = o.shape_;
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }
  TensorView view() const { return {data_, dtype_, shape_, Device::cpu()}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  DType dtype_ = DType::kU8;
  Shape shape_;
};

}  // namespace hyllm
