#include "model/layers/linear.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "util/log.h"
#include "util/status.h"

namespace hyllm {

namespace {

LinearInputObserver& observer() {
  static LinearInputObserver o;
  return o;
}

// One part as read from the checkpoint, on the host.
struct HostPart {
  std::string module;
  WeightFormat format = WeightFormat::kBf16;
  int64_t rows = 0, cols = 0;
  std::vector<std::byte> weight;  // bf16 or e4m3 codes, [rows, cols]
  std::vector<float> scale;       // block: [ceil(rows/128), ceil(cols/128)]; tensor: [1]
  float input_scale = 0.0f;       // tensor format
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::vector<float> as_floats(const std::vector<std::byte>& bytes) {
  std::vector<float> f(bytes.size() / 4);
  std::memcpy(f.data(), bytes.data(), f.size() * 4);
  return f;
}

HostPart read_part(WeightLoader& w, const std::string& module) {
  HostPart p;
  p.module = module;
  const std::string wname = module + ".weight";
  const TensorInfo& ti = w.info(wname);
  if (ti.shape.rank() != 2)
    fail(ErrorCode::kCorruptData, "{}: {} has shape {}, expected 2-D", ti.origin, wname, ti.shape.str());
  p.rows = ti.shape[0];
  p.cols = ti.shape[1];
  p.format = linear_format(w, module);
  auto raw = w.read_host(wname);
  if (p.format == WeightFormat::kBf16) {
    p.weight = ti.dtype == DType::kBF16 ? std::move(raw)
                                        : convert_float_bytes(raw.data(), ti.dtype, DType::kBF16, ti.shape.numel());
    return p;
  }
  p.weight = std::move(raw);
  auto read_f32 = [&](const std::string& name) {
    const TensorInfo& si = w.info(name);
    auto b = w.read_host(name);
    return as_floats(convert_float_bytes(b.data(), si.dtype, DType::kF32, si.shape.numel()));
  };
  if (p.format == WeightFormat::kFp8Block) {
    p.scale = read_f32(module + ".weight_scale_inv");
    int64_t want = ceil_div(p.rows, kFp8BlockSize) * ceil_div(p.cols, kFp8BlockSize);
    if (static_cast<int64_t>(p.scale.size()) != want)
      fail(ErrorCode::kCorruptData, "{}.weight_scale_inv has {} values, expected {}", module, p.scale.size(), want);
  } else {
    p.scale = read_f32(module + ".weight_scale");
    auto in = read_f32(module + ".input_scale");
    if (p.scale.size() != 1 || in.size() != 1)
      fail(ErrorCode::kCorruptData, "{}: per-tensor FP8 scales must be scalars", module);
    p.input_scale = in[0];
  }
  return p;
}

// Pads rows to a multiple of `align` and columns to `cols` with zeros (zero
// codes for FP8; padded block scales are 1 and multiply zeros).
void pad_part(HostPart& p, int64_t align, int64_t cols) {
  int64_t rows = ceil_div(p.rows, align) * align;
  cols = std::max(cols, p.cols);
  if (rows == p.rows && cols == p.cols) return;
  size_t esz = p.format == WeightFormat::kBf16 ? 2 : 1;
  std::vector<std::byte> wt(static_cast<size_t>(rows * cols) * esz, std::byte{0});
  for (int64_t r = 0; r < p.rows; ++r)
    std::memcpy(wt.data() + r * cols * esz, p.weight.data() + r * p.cols * esz, p.cols * esz);
  if (p.format == WeightFormat::kFp8Block) {
    int64_t sr = ceil_div(p.rows, kFp8BlockSize), sc = ceil_div(p.cols, kFp8BlockSize);
    int64_t nsr = ceil_div(rows, kFp8BlockSize), nsc = ceil_div(cols, kFp8BlockSize);
    std::vector<float> s(static_cast<size_t>(nsr * nsc), 1.0f);
    for (int64_t r = 0; r < sr; ++r)
      for (int64_t c = 0; c < sc; ++c) s[r * nsc + c] = p.scale[r * sc + c];
    p.scale = std::move(s);
  }
  p.weight = std::move(wt);
  p.rows = rows;
  p.cols = cols;
}

bool can_merge(const std::vector<HostPart>& parts) {
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i].format != parts[0].format || parts[i].cols != parts[0].cols) return false;
  if (parts[0].format == WeightFormat::kFp8Block)
    for (size_t i = 0; i + 1 < parts.size(); ++i)
      if (parts[i].rows % kFp8BlockSize != 0) return false;
  return true;
}

// Re-quantises per-tensor FP8 parts to the largest weight scale.
void unify_tensor_scales(std::vector<HostPart>& parts) {
  float smax = 0, imax = 0;
  for (auto& p : parts) {
    smax = std::max(smax, p.scale[0]);
    imax = std::max(imax, p.input_scale);
  }
  bool changed = false;
  for (auto& p : parts) {
    if (p.scale[0] != smax) {
      changed = true;
      float ratio = p.scale[0] / smax;
      for (auto& b : p.weight) {
        b = static_cast<std::byte>(f32_to_f8e4m3(f8e4m3_to_f32(static_cast<uint8_t>(b)) * ratio));
      }
      p.scale[0] = smax;
    }
    p.input_scale = imax;
  }
  if (changed) log::debug("re-quantised {} to a shared weight scale", parts[0].module);
}

LinearWeight upload_group(WeightLoader& w, const std::vector<HostPart>& parts) {
  const HostPart& first = parts[0];
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.rows;
  Shape shape{rows, first.cols};
  const DType wdtype = first.format == WeightFormat::kBf16 ? DType::kBF16 : DType::kF8E4M3;
  // Each part goes to its rows of the merged tensor: no host concatenation.
  TensorView wq = w.allocate(wdtype, shape);
  int64_t row = 0;
  for (const auto& p : parts) {
    if (!p.weight.empty())
      w.backend().copy_to_device(wq.slice_rows(row, row + p.rows).data(), p.weight.data(), p.weight.size());
    row += p.rows;
  }
  std::vector<float> sc;
  if (first.format == WeightFormat::kFp8Block)
    for (const auto& p : parts) sc.insert(sc.end(), p.scale.begin(), p.scale.end());
  if (first.format == WeightFormat::kBf16) return LinearWeight::bf16(wq);
  if (first.format == WeightFormat::kFp8Block) {
    Shape ss{ceil_div(rows, kFp8BlockSize), ceil_div(first.cols, kFp8BlockSize)};
    return LinearWeight::fp8_block(wq, w.upload(sc.data(), DType::kF32, ss));
  }
  float ws = first.scale[0], is = first.input_scale;
  return LinearWeight::fp8_tensor(wq, w.upload(&ws, DType::kF32, Shape{1}), w.upload(&is, DType::kF32, Shape{1}));
}

}  // namespace

void set_linear_input_observer(LinearInputObserver o) { observer() = std::move(o); }
const LinearInputObserver& linear_input_observer() { return observer(); }

WeightFormat linear_format(const WeightLoader& w, const std::string& module) {
  const TensorInfo& ti = w.info(module + ".weight");
  if (ti.dtype != DType::kF8E4M3) return w.quantizes_online(module) ? WeightFormat::kFp8Block : WeightFormat::kBf16;
  if (w.contains(module + ".weight_scale_inv")) return WeightFormat::kFp8Block;
  if (w.contains(module + ".weight_scale") && w.contains(module + ".input_scale")) return WeightFormat::kFp8Tensor;
  fail(ErrorCode::kCorruptData, "{}: FP8 weight {}.weight has no scales", ti.origin, module);
}

Linear Linear::load(WeightLoader& w, const std::vector<std::string>& modules, const LinearLoadOptions& opts) {
  HYLLM_CHECK(!modules.empty(), "Linear::load with no modules");
  if (auto lin = load_online_fp8(w, modules, opts)) return std::move(*lin);
  if (auto lin = load_generated(w, modules, opts)) return std::move(*lin);
  std::vector<HostPart> parts;
  for (const auto& m : modules) parts.push_back(read_part(w, m));
  Linear lin;
  lin.in_features_ = std::max(parts[0].cols, opts.in_features_padded);
  for (auto& p : parts) {
    if (p.cols != parts[0].cols)
      fail(ErrorCode::kCorruptData, "{} and {} read inputs of different widths ({} vs {})", parts[0].module,
           p.module, parts[0].cols, p.cols);
    bool pad_rows = p.format == WeightFormat::kFp8Block && opts.row_align > 1;
    pad_part(p, pad_rows ? opts.row_align : 1, lin.in_features_);
  }
  if (parts[0].format == WeightFormat::kFp8Tensor && can_merge(parts)) unify_tensor_scales(parts);
  if (can_merge(parts)) {
    int64_t off = 0;
    for (const auto& p : parts) {
      lin.parts_.push_back({p.module, 0, off, p.rows});
      off += p.rows;
    }
    lin.groups_.push_back({upload_group(w, parts)});
  } else {
    if (parts[0].format == WeightFormat::kFp8Block) {
      static std::once_flag logged;
      std::call_once(logged, [&] {
        log::info("block-FP8 projections whose parts are not multiples of 128 rows run as one GEMM per part "
                  "(e.g. {}: {} parts)", parts[0].module, parts.size());
      });
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      lin.parts_.push_back({parts[i].module, static_cast<int>(i), 0, parts[i].rows});
      lin.groups_.push_back({upload_group(w, {parts[i]})});
    }
  }
  return lin;
}

namespace {
// Whether quantised input `xq` is what the FP8 weight `w` reads.
bool reads(const LinearWeight& w, const Fp8Activation& xq) {
  if (xq.empty() || xq.mode != act_quant_mode_for(w.format)) return false;
  return xq.mode != ActQuantMode::kStatic || xq.scale.data() == w.input_scale.data();
}
}  // namespace

InputNeeds Linear::input_needs() const {
  InputNeeds needs;
  for (const auto& g : groups_) {
    const ActQuantMode mode = act_quant_mode_for(g.w.format);
    needs |= mode == ActQuantMode::kNone ? InputNeeds::bf16_only() : InputNeeds{mode, g.w.input_scale, false};
  }
  return needs;
}

std::vector<ColSlice> Linear::forward(Backend& be, Scratch& s, const LayerInput& in, DType out_dtype) const {
  const int64_t K = !in.x.empty() ? in.x.dim(1) : in.xq.cols();
  HYLLM_CHECK(K == in_features_, "linear input of {} columns vs in_features {}", K, in_features_);
  if (observer())
    for (const auto& p : parts_) observer()(p.module, in.x);
  std::vector<TensorView> outs;
  for (const auto& g : groups_) {
    // From the arena: backed for padded_rows(M) rows (see Scratch).
    TensorView out = s.take(out_dtype, Shape{in.rows(), g.w.out_features()});
    if (reads(g.w, in.xq)) {
      linear(be, {in.x, g.w, out, in.xq, true});
    } else {
      HYLLM_CHECK(!in.x.empty(), "{}: its {} input is only given quantised {}", parts_[0].module,
                  weight_format_name(g.w.format), act_quant_mode_name(in.xq.mode));
      linear(be, {in.x, g.w, out, {}, true});
    }
    outs.push_back(out);
  }
  std::vector<ColSlice> slices;
  for (const auto& p : parts_) slices.emplace_back(outs[p.group], p.offset, p.width);
  return slices;
}

TensorView Linear::forward_one(Backend& be, Scratch& s, const LayerInput& in, DType out_dtype) const {
  HYLLM_CHECK(groups_.size() == 1 && parts_.size() == 1, "forward_one on a {}-part linear", parts_.size());
  return forward(be, s, in, out_dtype)[0].tensor;
}

}  // namespace hyllm

namespace hyllm {

const LinearWeight& Linear::weight() const {
  HYLLM_CHECK(groups_.size() == 1 && parts_.size() == 1, "weight() on a {}-part linear", parts_.size());
  return groups_[0].w;
}

size_t Linear::scratch_bytes(int64_t rows, DType out_dtype) const {
  size_t b = 0;
  for (const auto& g : groups_) b += Scratch::bytes_for(out_dtype, rows, g.w.out_features());
  return b;
}

}  // namespace hyllm
