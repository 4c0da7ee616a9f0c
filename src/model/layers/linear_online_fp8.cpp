// Linear::load for --quantization fp8 on a BF16 checkpoint (vLLM's online
// fp8). Each part's bf16 weight goes to a temporary device buffer, where
// quantize_weight_fp8 writes its e4m3 codes into the part's rows of the
// merged weight and its one per-tensor scale (amax / 448) into every cell of
// the part's rows of the block-scale grid. The result is an ordinary
// kFp8Block weight: activations are quantised dynamically per token per 128
// columns by the block path, and merged parts keep their own scales (nothing
// is re-quantised).

#include "model/layers/linear.h"

#include <algorithm>

namespace hyllm {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct OnlinePart {
  std::string module;
  DType dtype = DType::kBF16;
  int64_t rows = 0, cols = 0, padded_rows = 0;
};

// Quantises one part into `out` [padded_rows, in_features] e4m3 and `scale`
// (its rows of the block grid). Padding rows and columns are zeros.
void quantize_part(WeightLoader& w, const OnlinePart& p, int64_t in_features, const TensorView& out,
                   const TensorView& scale) {
  Backend& be = w.backend();
  DeviceBuffer tmp(be, DType::kBF16, Shape{p.padded_rows, in_features});
  if (p.padded_rows != p.rows || in_features != p.cols) be.fill_zero(tmp.data(), tmp.size());
  const std::string name = p.module + ".weight";
  const bool whole_rows = in_features == p.cols;
  TensorView body = tmp.view().slice_rows(0, p.rows);
  if (!(whole_rows && p.dtype == DType::kBF16 && w.fill_generated(name, body))) {
    std::vector<std::byte> bytes = w.read_host(name);
    if (p.dtype != DType::kBF16) bytes = convert_float_bytes(bytes.data(), p.dtype, DType::kBF16, p.rows * p.cols);
    if (whole_rows) {
      be.copy_to_device(body.data(), bytes.data(), bytes.size());
    } else {
      const size_t row_bytes = static_cast<size_t>(p.cols) * 2;
      for (int64_t r = 0; r < p.rows; ++r) {
        be.copy_to_device(static_cast<char*>(tmp.data()) + r * in_features * 2, bytes.data() + r * row_bytes,
                          row_bytes);
      }
    }
  }
  quantize_weight_fp8(be, {tmp.view(), out, scale});
}

}  // namespace

std::optional<Linear> Linear::load_online_fp8(WeightLoader& w, const std::vector<std::string>& modules,
                                              const LinearLoadOptions& opts) {
  std::vector<OnlinePart> parts;
  for (const auto& m : modules) {
    const TensorInfo& ti = w.info(m + ".weight");
    if (!w.quantizes_online(m) || ti.dtype == DType::kF8E4M3) continue;
    if (ti.shape.rank() != 2)
      fail(ErrorCode::kCorruptData, "{}: {} has shape {}, expected 2-D", ti.origin, ti.name, ti.shape.str());
    const int64_t align = std::max<int64_t>(1, opts.row_align);
    parts.push_back({m, ti.dtype, ti.shape[0], ti.shape[1], ceil_div(ti.shape[0], align) * align});
  }
  if (parts.empty()) return std::nullopt;
  HYLLM_CHECK(parts.size() == modules.size(), "{}: online FP8 parts mixed with stored ones", modules[0]);
  for (const OnlinePart& p : parts) {
    if (p.cols != parts[0].cols)
      fail(ErrorCode::kCorruptData, "{} and {} read inputs of different widths ({} vs {})", parts[0].module, p.module,
           parts[0].cols, p.cols);
  }
  const int64_t in_features = std::max(parts[0].cols, opts.in_features_padded);
  // One GEMM when every part but the last fills whole 128-row blocks (the
  // block-FP8 merge rule of Linear::load), else one per part.
  bool merge = true;
  for (size_t i = 0; i + 1 < parts.size(); ++i) merge = merge && parts[i].padded_rows % kFp8BlockSize == 0;

  Linear lin;
  lin.in_features_ = in_features;
  auto add_group = [&](size_t begin, size_t end) {
    int64_t rows = 0, scale_rows = 0;
    for (size_t i = begin; i < end; ++i) {
      rows += parts[i].padded_rows;
      scale_rows += ceil_div(parts[i].padded_rows, kFp8BlockSize);
    }
    TensorView weight = w.allocate(DType::kF8E4M3, Shape{rows, in_features});
    TensorView scale = w.allocate(DType::kF32, Shape{scale_rows, ceil_div(in_features, kFp8BlockSize)});
    const int group = static_cast<int>(lin.groups_.size());
    int64_t off = 0, scale_off = 0;
    for (size_t i = begin; i < end; ++i) {
      const OnlinePart& p = parts[i];
      const int64_t sr = ceil_div(p.padded_rows, kFp8BlockSize);
      quantize_part(w, p, in_features, weight.slice_rows(off, off + p.padded_rows),
                    scale.slice_rows(scale_off, scale_off + sr));
      lin.parts_.push_back({p.module, group, off, p.padded_rows});
      off += p.padded_rows;
      scale_off += sr;
    }
    lin.groups_.push_back({LinearWeight::fp8_block(weight, scale)});
  };
  if (merge) {
    add_group(0, parts.size());
  } else {
    for (size_t i = 0; i < parts.size(); ++i) add_group(i, i + 1);
  }
  return lin;
}

}  // namespace hyllm
