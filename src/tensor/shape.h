#pragma once
// A tensor shape: up to kMaxDims extents, row-major (last dimension fastest).

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "util/status.h"

namespace hyllm {

class Shape {
 public:
  static constexpr int kMaxDims = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    HYLLM_CHECK(dims.size() <= kMaxDims, "too many dims: {}", dims.size());
    for (int64_t d : dims) dims_[rank_++] = d;
  }
  template <typename It>
  static Shape from(It begin, It end) {
    Shape s;
    for (It it = begin; it != end; ++it) {
      HYLLM_CHECK(s.rank_ < kMaxDims, "too many dims");
      s.dims_[s.rank_++] = static_cast<int64_t>(*it);
    }
    return s;
  }

  int rank() const { return rank_; }
  // Negative indices count from the end, as in PyTorch.
  int64_t operator[](int i) const { return dims_[normalize(i)]; }
  int64_t& operator[](int i) { return dims_[normalize(i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }

  bool operator==(const Shape& o) const {
    if (rank_ != o.rank_) return false;
    for (int i = 0; i < rank_; ++i)
      if (dims_[i] != o.dims_[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }

  // "[2, 3, 4]"
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[i]);
    }
    return s + "]";
  }

 private:
  int normalize(int i) const {
    int j = i < 0 ? i + rank_ : i;
    HYLLM_CHECK(j >= 0 && j < rank_, "dim {} out of range for rank {}", i, rank_);
    return j;
  }
  std::array<int64_t, kMaxDims> dims_{};
  int rank_ = 0;
};

}  // namespace hyllm
