#pragma once
// A non-owning view of a contiguous row-major tensor in some device's memory.
// Views are cheap values; whoever made the memory (a HostBuffer, a
// DeviceBuffer, an mmap'ed checkpoint) keeps it alive.

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace hyllm {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {DeviceKind::kCuda, i}; }
};

class TensorView {
 public:
  TensorView() = default;
  TensorView(void* data, DType dtype, Shape shape, Device device = Device::cpu())
      : data_(data), dtype_(dtype), shape_(shape), device_(device) {}

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Device device() const { return device_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr; }

  // Same memory, another shape with the same element count.
  TensorView reshape(Shape s) const {
    HYLLM_CHECK(s.numel() == numel(), "reshape {} -> {}", shape_.str(), s.str());
    return {data_, dtype_, s, device_};
  }
  // Rows [begin, end) of the outermost dimension.
  TensorView slice_rows(int64_t begin, int64_t end) const {
    HYLLM_CHECK(rank() >= 1 && begin >= 0 && begin <= end && end <= dim(0), "slice [{}, {}) of {}",
                begin, end, shape_.str());
    Shape s = shape_;
    s[0] = end - begin;
    size_t row_bytes = dim(0) == 0 ? 0 : nbytes() / static_cast<size_t>(dim(0));
    return {static_cast<char*>(data_) + static_cast<size_t>(begin) * row_bytes, dtype_, s, device_};
  }

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Shape shape_;
  Device device_;
};

}  // namespace hyllm
