#include "model/layers/weights.h"

#include <cstring>

#include "backend/ops.h"
#include "model/loader/checkpoint_check.h"
#include "util/status.h"

namespace hyllm {

namespace {

float read_float(const std::byte* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return bf16_to_f32(h);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return f16_to_f32(h);
    }
    default:
      fail(ErrorCode::kInternal, "read_float: {} is not a float type", dtype_name(t));
  }
}

}  // namespace

std::vector<std::byte> convert_float_bytes(const void* src, DType from, DType to, int64_t numel) {
  const auto* in = static_cast<const std::byte*>(src);
  std::vector<std::byte> out(static_cast<size_t>(numel) * dtype_size(to));
  if (from == to) {
    std::memcpy(out.data(), in, out.size());
    return out;
  }
  if (to == DType::kF32) {
    auto* o = reinterpret_cast<float*>(out.data());
    for (int64_t i = 0; i < numel; ++i) o[i] = read_float(in, from, i);
  } else if (to == DType::kBF16) {
    auto* o = reinterpret_cast<uint16_t*>(out.data());
    for (int64_t i = 0; i < numel; ++i) o[i] = f32_to_bf16(read_float(in, from, i));
  } else {
    fail(ErrorCode::kInternal, "convert_float_bytes: unsupported target {}", dtype_name(to));
  }
  return out;
}

WeightLoader::WeightLoader(Backend& backend, const WeightSource& source) : backend_(backend), source_(source) {}

std::vector<std::byte> WeightLoader::read_host(const std::string& name) const {
  const TensorInfo& ti = source_.info(name);
  std::vector<std::byte> bytes(ti.nbytes);
  if (auto m = source_.mapped(name)) {
    std::memcpy(bytes.data(), m->data(), ti.nbytes);
  } else {
    source_.read(name, bytes.data());
  }
  check_scale_values(ti, bytes.data());
  const_cast<WeightLoader*>(this)->consumed_.insert(name);
  return bytes;
}

TensorView WeightLoader::allocate(DType dtype, Shape shape) {
  DeviceBuffer buf(backend_, dtype, shape);
  device_bytes_ += buf.size();
  TensorView v = buf.view();
  buffers_.push_back(std::move(buf));
  return v;
}

TensorView WeightLoader::upload(const void* host, DType dtype, Shape shape) {
  TensorView v = allocate(dtype, shape);
  if (v.nbytes() > 0) backend_.copy_to_device(v.data(), host, v.nbytes());
  return v;
}

bool WeightLoader::fill_generated(const std::string& name, const TensorView& dst) {
  const TensorInfo& ti = source_.info(name);
  if (ti.dtype != dst.dtype() || ti.shape.numel() != dst.numel()) return false;
  const std::optional<GeneratedFill> g = source_.generated(name);
  if (!g) return false;
  fill_random(backend_, {dst, g->stream, g->normal ? RandomDistribution::kNormal : RandomDistribution::kUniform,
                         g->offset, g->scale});
  consumed_.insert(name);
  return true;
}

TensorView WeightLoader::load(const std::string& name, DType want) {
  const TensorInfo& ti = source_.info(name);
  if ((ti.dtype == want || ti.dtype == DType::kF8E4M3) && source_.generated(name)) {
    TensorView v = allocate(ti.dtype, ti.shape);
    if (fill_generated(name, v)) return v;
  }
  std::vector<std::byte> bytes = read_host(name);
  if (ti.dtype == DType::kF8E4M3 || ti.dtype == want) return upload(bytes.data(), ti.dtype, ti.shape);
  if (!dtype_is_float(ti.dtype))
    fail(ErrorCode::kCorruptData, "{}: tensor {} has dtype {}, expected a float type", ti.origin, name,
         dtype_name(ti.dtype));
  auto converted = convert_float_bytes(bytes.data(), ti.dtype, want, ti.shape.numel());
  return upload(converted.data(), want, ti.shape);
}

std::vector<std::string> WeightLoader::unconsumed() const {
  std::vector<std::string> out;
  for (const TensorInfo& t : source_.tensors())
    if (!consumed_.count(t.name)) out.push_back(t.name);
  return out;
}

}  // namespace hyllm
