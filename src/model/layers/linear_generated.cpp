// Linear::load for generated (dummy) weights: every part is filled where it
// lives with fill_random (WeightLoader::fill_generated), straight into its
// rows of the merged weight and, for FP8, of the merged scales; nothing goes
// through host memory.

#include "model/layers/linear.h"

namespace hyllm {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_generated(const WeightLoader& w, const std::string& name) {
  return w.contains(name) && w.source().generated(name).has_value();
}

// Whether every part's scalar `suffix` tensor is generated as the same
// constant, so that the parts share it without re-quantisation.
bool same_constant(const WeightLoader& w, const std::vector<std::string>& modules, const std::string& suffix) {
  std::optional<GeneratedFill> first;
  for (const auto& m : modules) {
    if (!is_generated(w, m + suffix)) return false;
    const GeneratedFill g = *w.source().generated(m + suffix);
    if (g.scale != 0.0f || (first && g.offset != first->offset)) return false;
    first = g;
  }
  return true;
}

}  // namespace

// nullopt when any part is stored, or the parts need padding or
// re-quantisation to share one GEMM: Linear::load's host path does those.
std::optional<Linear> Linear::load_generated(WeightLoader& w, const std::vector<std::string>& modules,
                                             const LinearLoadOptions& opts) {
  const DType dtype = w.info(modules[0] + ".weight").dtype;
  if (dtype != DType::kBF16 && dtype != DType::kF8E4M3) return std::nullopt;
  int64_t rows = 0, cols = -1;
  for (size_t i = 0; i < modules.size(); ++i) {
    const TensorInfo& ti = w.info(modules[i] + ".weight");
    if (ti.dtype != dtype || ti.shape.rank() != 2 || !is_generated(w, ti.name)) return std::nullopt;
    if (cols >= 0 && ti.shape[1] != cols) return std::nullopt;
    cols = ti.shape[1];
    rows += ti.shape[0];
  }
  if (opts.in_features_padded > cols) return std::nullopt;
  const WeightFormat format = dtype == DType::kBF16 ? WeightFormat::kBf16 : linear_format(w, modules[0]);
  for (size_t i = 0; i < modules.size(); ++i) {
    const std::string& m = modules[i];
    if (format != WeightFormat::kBf16 && linear_format(w, m) != format) return std::nullopt;
    const int64_t part_rows = w.info(m + ".weight").shape[0];
    if (format == WeightFormat::kFp8Block) {
      // Merged along 128-row blocks: every part but the last fills whole blocks.
      const bool last = i + 1 == modules.size();
      if ((!last && part_rows % kFp8BlockSize != 0) || part_rows % opts.row_align != 0) return std::nullopt;
      if (!is_generated(w, m + ".weight_scale_inv")) return std::nullopt;
    }
  }
  if (format == WeightFormat::kFp8Tensor &&
      !(same_constant(w, modules, ".weight_scale") && same_constant(w, modules, ".input_scale"))) {
    return std::nullopt;
  }

  Linear lin;
  lin.in_features_ = cols;
  TensorView merged = w.allocate(dtype, Shape{rows, cols});
  TensorView scale, input_scale;
  if (format == WeightFormat::kFp8Block) {
    int64_t scale_rows = 0;
    for (const auto& m : modules) scale_rows += ceil_div(w.info(m + ".weight").shape[0], kFp8BlockSize);
    scale = w.allocate(DType::kF32, Shape{scale_rows, ceil_div(cols, kFp8BlockSize)});
  } else if (format == WeightFormat::kFp8Tensor) {
    scale = w.allocate(DType::kF32, Shape{1});
    input_scale = w.allocate(DType::kF32, Shape{1});
  }
  int64_t off = 0, scale_off = 0;
  for (const auto& m : modules) {
    const TensorInfo& ti = w.info(m + ".weight");
    const int64_t r = ti.shape[0];
    HYLLM_CHECK(w.fill_generated(ti.name, merged.slice_rows(off, off + r)), "{} is not generated", ti.name);
    if (format == WeightFormat::kFp8Block) {
      const int64_t sr = ceil_div(r, kFp8BlockSize);
      HYLLM_CHECK(w.fill_generated(m + ".weight_scale_inv", scale.slice_rows(scale_off, scale_off + sr)),
                  "{}.weight_scale_inv is not generated", m);
      scale_off += sr;
    } else if (format == WeightFormat::kFp8Tensor) {
      // The same constant for every part (checked above): each fill rewrites it.
      HYLLM_CHECK(w.fill_generated(m + ".weight_scale", scale) && w.fill_generated(m + ".input_scale", input_scale),
                  "{} scales are not generated", m);
    }
    lin.parts_.push_back({m, 0, off, r});
    off += r;
  }
  switch (format) {
    case WeightFormat::kBf16: lin.groups_.push_back({LinearWeight::bf16(merged)}); break;
    case WeightFormat::kFp8Block: lin.groups_.push_back({LinearWeight::fp8_block(merged, scale)}); break;
    case WeightFormat::kFp8Tensor:
      lin.groups_.push_back({LinearWeight::fp8_tensor(merged, scale, input_scale)});
      break;
  }
  return lin;
}

}  // namespace hyllm
