#include "backend/ops_check.h"

#include <cstdint>

namespace hyllm::ops_detail {

std::string dims_str(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  bool first = true;
  for (int64_t d : dims) {
    if (!first) s += ", ";
    first = false;
    s += d == kAny ? std::string("*") : std::to_string(d);
  }
  return s + "]";
}

namespace {
std::string dtypes_str(std::initializer_list<DType> dtypes) {
  std::string s;
  for (DType d : dtypes) {
    if (!s.empty()) s += " or ";
    s += dtype_name(d);
  }
  return s;
}
}  // namespace

const TensorView& OpCheck::tensor(const char* field, const TensorView& t, std::initializer_list<DType> dtypes,
                                  std::initializer_list<int64_t> dims) const {
  bool shape_ok = t.rank() == static_cast<int>(dims.size());
  if (shape_ok) {
    int i = 0;
    for (int64_t d : dims) {
      if (d != kAny && t.dim(i) != d) shape_ok = false;
      ++i;
    }
  }
  require(shape_ok, "{} has shape {}, expected {}", field, t.shape().str(), dims_str(dims));
  require(t.data() != nullptr || t.numel() == 0, "{} is missing (no data)", field);
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok |= t.dtype() == d;
  require(dtype_ok, "{} has dtype {}, expected {}", field, dtype_name(t.dtype()), dtypes_str(dtypes));
  require(t.device() == device_ || t.numel() == 0, "{} is on another device than the backend", field);
  return t;
}

bool OpCheck::optional(const char* field, const TensorView& t, std::initializer_list<DType> dtypes,
                       std::initializer_list<int64_t> dims) const {
  if (t.empty() && t.rank() == 0) return false;
  tensor(field, t, dtypes, dims);
  return true;
}

void OpCheck::cols(const char* field, const ColSlice& s, std::initializer_list<DType> dtypes, int64_t rows,
                   int64_t width) const {
  tensor(field, s.tensor, dtypes, {rows, kAny});
  require(s.width == width, "{} has {} columns, expected {}", field, s.width, width);
  require(s.offset >= 0 && s.offset + s.width <= s.tensor.dim(1),
          "{} columns [{}, {}) exceed the tensor's {} columns", field, s.offset, s.offset + s.width,
          s.tensor.dim(1));
}

void OpCheck::weight(const char* field, const LinearWeight& w, int64_t n, int64_t k) const {
  require(!w.empty(), "{}: weight is missing", field);
  require(w.weight.rank() == 2, "{}: weight has shape {}, expected [N, K]", field, w.weight.shape().str());
  const int64_t N = w.weight.dim(0), K = w.weight.dim(1);
  require((n == kAny || N == n) && (k == kAny || K == k), "{}: weight has shape {}, expected {}", field,
          w.weight.shape().str(), dims_str({n, k}));
  std::string f = std::string(field);
  switch (w.format) {
    case WeightFormat::kBf16:
      tensor((f + ".weight").c_str(), w.weight, {DType::kBF16}, {N, K});
      require(w.weight_scale.empty() && w.input_scale.empty(), "{}: a bf16 weight has no scales", field);
      break;
    case WeightFormat::kFp8Block:
      tensor((f + ".weight").c_str(), w.weight, {DType::kF8E4M3}, {N, K});
      tensor((f + ".weight_scale").c_str(), w.weight_scale, {DType::kF32},
             {(N + kFp8BlockSize - 1) / kFp8BlockSize, (K + kFp8BlockSize - 1) / kFp8BlockSize});
      require(w.input_scale.empty(), "{}: block fp8 quantises activations dynamically (no input_scale)", field);
      break;
    case WeightFormat::kFp8Tensor:
      tensor((f + ".weight").c_str(), w.weight, {DType::kF8E4M3}, {N, K});
      tensor((f + ".weight_scale").c_str(), w.weight_scale, {DType::kF32}, {1});
      tensor((f + ".input_scale").c_str(), w.input_scale, {DType::kF32}, {1});
      require(K <= 65536, "{}: per-tensor fp8 needs K <= 65536, got {}", field, K);
      break;
    default:
      bad("{}: unknown weight format {}", field, static_cast<int>(w.format));
  }
}

void OpCheck::fp8_activation(const char* field, const Fp8Activation& a, ActQuantMode mode, int64_t rows,
                             int64_t cols) const {
  require(a.mode == mode, "{} is quantised {}, expected {}", field, act_quant_mode_name(a.mode),
          act_quant_mode_name(mode));
  const std::string f(field);
  tensor((f + ".q").c_str(), a.q, {DType::kF8E4M3}, {rows, cols});
  if (mode == ActQuantMode::kGroup128) {
    tensor((f + ".scale").c_str(), a.scale, {DType::kF32},
           {(a.q.dim(1) + kFp8BlockSize - 1) / kFp8BlockSize, a.q.dim(0)});
  } else {
    tensor((f + ".scale").c_str(), a.scale, {DType::kF32}, {1});
  }
}

void OpCheck::disjoint(const char* a, const void* pa, size_t na, const char* b, const void* pb, size_t nb) const {
  if (pa == nullptr || pb == nullptr || na == 0 || nb == 0) return;
  const auto ua = reinterpret_cast<uintptr_t>(pa), ub = reinterpret_cast<uintptr_t>(pb);
  require(ua + na <= ub || ub + nb <= ua, "{} and {} overlap", a, b);
}

int64_t OpCheck::sequences(const TensorView& query_start_loc) const {
  tensor("query_start_loc", query_start_loc, {DType::kI32}, {kAny});
  require(query_start_loc.dim(0) >= 1, "query_start_loc needs S + 1 >= 1 entries");
  return query_start_loc.dim(0) - 1;
}

}  // namespace hyllm::ops_detail
