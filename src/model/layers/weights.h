#pragma once
// Moves checkpoint tensors onto the backend. Layers ask for tensors by
// canonical name (model/loader/weight_source.h) and the dtype the op that
// reads them takes; the loader converts float types on the host (exactly for
// widening, round-to-nearest-even for narrowing) and keeps FP8 codes and
// their fp32 scales as they are. It remembers which tensors were taken so the
// model can prove it consumed every one (an unused FP8 scale is how scale
// name-mapping bugs turn into garbage).
//
// No lasting host copy: a weight's bytes pass through host memory only in
// buffers local to one tensor's (or one merged projection's) load, freed
// before the next; mmap'd checkpoint pages belong to the WeightSource, which
// load_model drops once the model is built. Generated (dummy) tensors never
// touch the host: they are filled where they live with ops.h fill_random.

#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "model/loader/weight_source.h"

namespace hyllm {

// Host-side conversion of a float tensor's bytes to bf16 or f32.
std::vector<std::byte> convert_float_bytes(const void* src, DType from, DType to, int64_t numel);

class WeightLoader {
 public:
  WeightLoader(Backend& backend, const WeightSource& source);

  Backend& backend() { return backend_; }
  const WeightSource& source() const { return source_; }
  bool contains(std::string_view name) const { return source_.contains(name); }
  const TensorInfo& info(std::string_view name) const { return source_.info(name); }

  // The tensor on the device in `want` (kBF16 or kF32) for float tensors;
  // FP8 tensors come as stored (want is ignored for them).
  TensorView load(const std::string& name, DType want);
  // When the source generates `name` (GeneratedFill) in dst's dtype and
  // size, fills dst with it on the backend, marks it consumed and returns
  // true; false otherwise (nothing is done).
  bool fill_generated(const std::string& name, const TensorView& dst);
  // A new device tensor of `dtype` and `shape` owned by this loader, uninitialised.
  TensorView allocate(DType dtype, Shape shape);
  // The tensor's bytes as stored, on the host (for merging before upload).
  // An FP8 scale that is not finite and positive is kCorruptData here
  // (check_scale_values).
  std::vector<std::byte> read_host(const std::string& name) const;
  // Uploads host bytes as a new device tensor owned by this loader.
  TensorView upload(const void* host, DType dtype, Shape shape);

  // Names in the source that no load() or read_host() asked for.
  std::vector<std::string> unconsumed() const;

  // Online FP8 (--quantization fp8 on a BF16 checkpoint): the linear modules
  // ("layers.0.mlp.down_proj") that Linear::load quantises on the device.
  void set_online_fp8_modules(std::unordered_set<std::string> modules) { online_fp8_ = std::move(modules); }
  bool quantizes_online(const std::string& module) const { return online_fp8_.count(module) > 0; }
  // Hands the device buffers to the model that keeps them alive.
  std::vector<DeviceBuffer> take_buffers() { return std::move(buffers_); }
  size_t device_bytes() const { return device_bytes_; }

 private:
  Backend& backend_;
  const WeightSource& source_;
  std::vector<DeviceBuffer> buffers_;
  std::unordered_set<std::string> consumed_;
  std::unordered_set<std::string> online_fp8_;
  size_t device_bytes_ = 0;
};

}  // namespace hyllm
