#pragma once
// Activation memory for one forward pass: a bump allocator over one device
// buffer whose size is fixed when the model is built (from the largest step it
// will run), so that the same addresses serve every step of that shape. A
// layer marks the arena on entry and releases to the mark on exit.
//
// Every tensor is backed for padded_rows(dim 0) rows (ops.h's
// kActivationRowPad), so that the views made here may carry the flags that
// let ops run whole groups of rows.

#include <cstddef>

#include "backend/backend.h"
#include "backend/ops.h"
#include "util/status.h"

namespace hyllm {

class Scratch {
 public:
  Scratch() = default;
  Scratch(Backend& backend, size_t capacity) : buffer_(backend, capacity), device_(backend.device()) {}

  TensorView take(DType dtype, Shape shape) {
    const int64_t rows = shape.rank() > 0 ? shape[0] : 1;
    const size_t aligned = bytes_for(dtype, rows, rows > 0 ? shape.numel() / rows : 0);
    HYLLM_CHECK(used_ + aligned <= buffer_.size(), "scratch exhausted: {} + {} > {} bytes", used_, aligned,
                buffer_.size());
    void* p = static_cast<char*>(buffer_.data()) + used_;
    used_ += aligned;
    if (used_ > high_water_) high_water_ = used_;
    return {p, dtype, shape, device_};
  }
  size_t mark() const { return used_; }
  void release(size_t mark) { used_ = mark; }
  size_t capacity() const { return buffer_.size(); }
  size_t high_water() const { return high_water_; }

  // Bytes take() uses for a tensor of `rows` rows (its first dimension) of
  // `cols` elements, row room and alignment included (for sizing).
  static size_t bytes_for(DType dtype, int64_t rows, int64_t cols) {
    size_t b = static_cast<size_t>(padded_rows(rows) * cols) * dtype_size(dtype);
    return (b + kAlign - 1) / kAlign * kAlign;
  }

 private:
  static constexpr size_t kAlign = 256;
  DeviceBuffer buffer_;
  Device device_;
  size_t used_ = 0;
  size_t high_water_ = 0;
};

// Releases to the mark taken at construction.
class ScratchScope {
 public:
  explicit ScratchScope(Scratch& s) : s_(s), mark_(s.mark()) {}
  ~ScratchScope() { s_.release(mark_); }
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  Scratch& s_;
  size_t mark_;
};

}  // namespace hyllm
