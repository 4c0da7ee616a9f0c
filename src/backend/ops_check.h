#pragma once
// Argument validation shared by the op entry points (ops*.cpp). Every failure
// is kInvalidArgument with the op and field named.

#include <initializer_list>
#include <string>

#include "backend/ops.h"

namespace hyllm::ops_detail {

// Expected extent that accepts any size.
inline constexpr int64_t kAny = -1;

class OpCheck {
 public:
  OpCheck(Device device, const char* op) : device_(device), op_(op) {}

  template <typename... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) const {
    fail(ErrorCode::kInvalidArgument, "op {}: {}", op_, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void require(bool cond, fmt::format_string<Args...> f, Args&&... args) const {
    if (!cond) bad(f, std::forward<Args>(args)...);
  }

  // A required tensor on the backend's device with one of dtypes and the
  // given extents (kAny matches any extent). Returns it for chaining.
  const TensorView& tensor(const char* field, const TensorView& t, std::initializer_list<DType> dtypes,
                           std::initializer_list<int64_t> dims) const;
  // Same, but an empty view is accepted (returns false then).
  bool optional(const char* field, const TensorView& t, std::initializer_list<DType> dtypes,
                std::initializer_list<int64_t> dims) const;
  // A column slice of a 2-D tensor with `rows` rows and `width` columns.
  void cols(const char* field, const ColSlice& s, std::initializer_list<DType> dtypes, int64_t rows,
            int64_t width) const;
  // A linear weight of N x K (kAny allowed) and its scales.
  void weight(const char* field, const LinearWeight& w, int64_t n, int64_t k) const;
  // An FP8 activation of rows x cols (kAny allowed) in the given mode.
  void fp8_activation(const char* field, const Fp8Activation& a, ActQuantMode mode, int64_t rows,
                      int64_t cols) const;
  // Byte ranges [pa, pa + na) and [pb, pb + nb) share no byte (an empty
  // range shares none).
  void disjoint(const char* a, const void* pa, size_t na, const char* b, const void* pb, size_t nb) const;
  // Per-sequence metadata: query_start_loc [S+1] and the [S] tensors that go with it.
  int64_t sequences(const TensorView& query_start_loc) const;

  const char* op() const { return op_; }

 private:
  Device device_;
  const char* op_;
};

std::string dims_str(std::initializer_list<int64_t> dims);

}  // namespace hyllm::ops_detail
