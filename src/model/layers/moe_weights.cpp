#include "model/layers/moe_weights.h"

#include <algorithm>
#include <cstring>

#include "model/layers/linear.h"
#include "util/status.h"

namespace hyllm {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A float tensor (any float dtype) as f32 values on the host.
std::vector<float> read_f32(WeightLoader& w, const std::string& name) {
  const TensorInfo& ti = w.info(name);
  auto bytes = convert_float_bytes(w.read_host(name).data(), ti.dtype, DType::kF32, ti.shape.numel());
  std::vector<float> v(static_cast<size_t>(ti.shape.numel()));
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// A float tensor into `dst` (bf16 device memory of the same element count):
// filled on the device when the source generates it, else converted on the host.
void load_bf16_into(WeightLoader& w, const std::string& name, const TensorView& dst) {
  const TensorInfo& ti = w.info(name);
  if (ti.dtype == DType::kF8E4M3 || !dtype_is_float(ti.dtype))
    fail(ErrorCode::kUnsupported, "{}: {} is {}, expected a float type", ti.origin, name, dtype_name(ti.dtype));
  if (ti.shape.numel() != dst.numel())
    fail(ErrorCode::kCorruptData, "{}: {} has shape {}, expected {} elements", ti.origin, name, ti.shape.str(),
         dst.numel());
  if (w.fill_generated(name, dst)) return;
  auto bytes = w.read_host(name);
  if (ti.dtype != DType::kBF16) bytes = convert_float_bytes(bytes.data(), ti.dtype, DType::kBF16, ti.shape.numel());
  w.backend().copy_to_device(dst.data(), bytes.data(), bytes.size());
}

// Expert e of a device tensor with a leading expert dimension, as a tensor of
// the remaining dimensions.
TensorView expert_view(const TensorView& t, int64_t e) {
  return t.slice_rows(e, e + 1).reshape(Shape::from(t.shape().begin() + 1, t.shape().end()));
}

void expect_shape(const TensorInfo& ti, int64_t rows, int64_t cols) {
  if (ti.shape.rank() != 2 || ti.shape[0] != rows || ti.shape[1] != cols)
    fail(ErrorCode::kCorruptData, "{}: {} has shape {}, expected [{}, {}]", ti.origin, ti.name, ti.shape.str(), rows,
         cols);
}

StackedExperts load_bf16(WeightLoader& w, const std::vector<std::string>& modules, int64_t I, int64_t H) {
  const int64_t n = static_cast<int64_t>(modules.size());
  TensorView gu = w.allocate(DType::kBF16, Shape{n, 2 * I, H});
  TensorView dn = w.allocate(DType::kBF16, Shape{n, H, I});
  for (int64_t e = 0; e < n; ++e) {
    const TensorView g = expert_view(gu, e);
    load_bf16_into(w, modules[e] + "gate_proj.weight", g.slice_rows(0, I));
    load_bf16_into(w, modules[e] + "up_proj.weight", g.slice_rows(I, 2 * I));
    load_bf16_into(w, modules[e] + "down_proj.weight", expert_view(dn, e));
  }
  return {LinearWeight::bf16(gu), LinearWeight::bf16(dn), I};
}

// Dummy (generated) expert tensors are filled on the device where they live
// when no padding is needed; false leaves the host path to do it.
bool fill_on_device(WeightLoader& w, const std::vector<std::pair<std::string, TensorView>>& tensors) {
  for (const auto& [name, dst] : tensors) {
    if (!w.contains(name) || !w.source().generated(name)) return false;
    const TensorInfo& ti = w.info(name);
    if (ti.dtype != dst.dtype() || ti.shape.numel() != dst.numel()) return false;
  }
  for (const auto& [name, dst] : tensors) HYLLM_CHECK(w.fill_generated(name, dst), "fill_generated {}", name);
  return true;
}

// Block FP8 with the intermediate size padded to Ip (a multiple of 128):
// zero codes in padded rows / columns, scale 1 in padded blocks.
StackedExperts load_fp8_block(WeightLoader& w, const std::vector<std::string>& modules, int64_t I, int64_t H) {
  const int64_t n = static_cast<int64_t>(modules.size()), B = kFp8BlockSize;
  const int64_t Ip = ceil_div(I, B) * B, Hb = ceil_div(H, B), Ib = ceil_div(I, B), Ipb = Ip / B;
  TensorView gu = w.allocate(DType::kF8E4M3, Shape{n, 2 * Ip, H});
  TensorView gus = w.allocate(DType::kF32, Shape{n, 2 * Ipb, Hb});
  TensorView dn = w.allocate(DType::kF8E4M3, Shape{n, H, Ip});
  TensorView dns = w.allocate(DType::kF32, Shape{n, Hb, Ipb});
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  for (int64_t e = 0; e < n; ++e) {
    const std::string& m = modules[e];
    if (Ip == I && fill_on_device(w, {{m + "gate_proj.weight", expert_view(gu, e).slice_rows(0, I)},
                                      {m + "up_proj.weight", expert_view(gu, e).slice_rows(I, 2 * I)},
                                      {m + "gate_proj.weight_scale_inv", expert_view(gus, e).slice_rows(0, Ipb)},
                                      {m + "up_proj.weight_scale_inv", expert_view(gus, e).slice_rows(Ipb, 2 * Ipb)},
                                      {m + "down_proj.weight", expert_view(dn, e)},
                                      {m + "down_proj.weight_scale_inv", expert_view(dns, e)}})) {
      continue;
    }
    codes.assign(static_cast<size_t>(2 * Ip * H), 0);
    scales.assign(static_cast<size_t>(2 * Ipb * Hb), 1.0f);
    for (int part = 0; part < 2; ++part) {
      const std::string mod = m + (part == 0 ? "gate_proj" : "up_proj");
      auto q = w.read_host(mod + ".weight");
      std::memcpy(codes.data() + part * Ip * H, q.data(), static_cast<size_t>(I * H));
      auto s = read_f32(w, mod + ".weight_scale_inv");
      if (static_cast<int64_t>(s.size()) != Ib * Hb)
        fail(ErrorCode::kCorruptData, "{}.weight_scale_inv has {} values, expected {}", mod, s.size(), Ib * Hb);
      std::copy(s.begin(), s.end(), scales.begin() + part * Ipb * Hb);
    }
    w.backend().copy_to_device(expert_view(gu, e).data(), codes.data(), codes.size());
    w.backend().copy_to_device(expert_view(gus, e).data(), scales.data(), scales.size() * 4);

    const std::string mod = m + "down_proj";
    auto q = w.read_host(mod + ".weight");
    codes.assign(static_cast<size_t>(H * Ip), 0);
    for (int64_t h = 0; h < H; ++h) std::memcpy(codes.data() + h * Ip, q.data() + h * I, static_cast<size_t>(I));
    auto s = read_f32(w, mod + ".weight_scale_inv");
    if (static_cast<int64_t>(s.size()) != Hb * Ib)
      fail(ErrorCode::kCorruptData, "{}.weight_scale_inv has {} values, expected {}", mod, s.size(), Hb * Ib);
    scales.assign(static_cast<size_t>(Hb * Ipb), 1.0f);
    for (int64_t r = 0; r < Hb; ++r) std::copy(s.begin() + r * Ib, s.begin() + (r + 1) * Ib, scales.begin() + r * Ipb);
    w.backend().copy_to_device(expert_view(dn, e).data(), codes.data(), codes.size());
    w.backend().copy_to_device(expert_view(dns, e).data(), scales.data(), scales.size() * 4);
  }
  return {LinearWeight::fp8_block(gu, gus), LinearWeight::fp8_block(dn, dns), Ip};
}

// --quantization fp8 on BF16 experts stored per expert: each expert's
// gate, up and down projections are quantised on the device with one
// per-tensor scale written into every cell of their rows of the block grid
// (as Linear::load_online_fp8 does), so they run through the block-FP8 expert
// kernels with dynamic activation scales. Padding rows and columns are zeros.
StackedExperts load_online_fp8_block(WeightLoader& w, const std::vector<std::string>& modules, int64_t I,
                                     int64_t H) {
  const int64_t n = static_cast<int64_t>(modules.size()), B = kFp8BlockSize;
  const int64_t Ip = ceil_div(I, B) * B, Hb = ceil_div(H, B), Ipb = Ip / B;
  Backend& be = w.backend();
  TensorView gu = w.allocate(DType::kF8E4M3, Shape{n, 2 * Ip, H});
  TensorView gus = w.allocate(DType::kF32, Shape{n, 2 * Ipb, Hb});
  TensorView dn = w.allocate(DType::kF8E4M3, Shape{n, H, Ip});
  TensorView dns = w.allocate(DType::kF32, Shape{n, Hb, Ipb});
  DeviceBuffer rows_tmp(be, DType::kBF16, Shape{Ip, H});
  DeviceBuffer cols_tmp(be, DType::kBF16, Shape{H, Ip});
  be.fill_zero(rows_tmp.data(), rows_tmp.size());
  be.fill_zero(cols_tmp.data(), cols_tmp.size());
  for (int64_t e = 0; e < n; ++e) {
    for (int part = 0; part < 2; ++part) {
      const std::string name = modules[e] + (part == 0 ? "gate_proj" : "up_proj") + ".weight";
      load_bf16_into(w, name, rows_tmp.view().slice_rows(0, I));
      quantize_weight_fp8(be, {rows_tmp.view(), expert_view(gu, e).slice_rows(part * Ip, (part + 1) * Ip),
                               expert_view(gus, e).slice_rows(part * Ipb, (part + 1) * Ipb)});
    }
    const std::string name = modules[e] + "down_proj.weight";
    if (Ip == I) {
      load_bf16_into(w, name, cols_tmp.view());
    } else {
      const TensorInfo& ti = w.info(name);
      auto bytes = w.read_host(name);
      if (ti.dtype != DType::kBF16) bytes = convert_float_bytes(bytes.data(), ti.dtype, DType::kBF16, H * I);
      for (int64_t h = 0; h < H; ++h) {
        be.copy_to_device(static_cast<char*>(cols_tmp.data()) + h * Ip * 2, bytes.data() + h * I * 2,
                          static_cast<size_t>(I) * 2);
      }
    }
    quantize_weight_fp8(be, {cols_tmp.view(), expert_view(dn, e), expert_view(dns, e)});
  }
  return {LinearWeight::fp8_block(gu, gus), LinearWeight::fp8_block(dn, dns), Ip};
}

float scalar(WeightLoader& w, const std::string& name) {
  auto v = read_f32(w, name);
  if (v.size() != 1) fail(ErrorCode::kCorruptData, "{}: per-tensor FP8 scales must be scalars", name);
  return v[0];
}

// Per-tensor FP8 (ModelOpt) experts run as block FP8: the codes as stored,
// each projection's one weight scale in every cell of its rows of the block
// grid (gate and up keep their own scales, nothing is re-quantised), and the
// input quantised dynamically per token per 128 columns like every other
// expert. The checkpoint's static input scales are not used for experts:
// dynamic scales are at least as accurate, and one expert kernel family
// serves both formats. Padding to whole 128-row blocks is zero codes.
StackedExperts load_fp8_tensor(WeightLoader& w, const std::vector<std::string>& modules, int64_t I, int64_t H) {
  const int64_t n = static_cast<int64_t>(modules.size()), B = kFp8BlockSize;
  const int64_t Ip = ceil_div(I, B) * B, Hb = ceil_div(H, B), Ipb = Ip / B;
  TensorView gu = w.allocate(DType::kF8E4M3, Shape{n, 2 * Ip, H});
  TensorView gus = w.allocate(DType::kF32, Shape{n, 2 * Ipb, Hb});
  TensorView dn = w.allocate(DType::kF8E4M3, Shape{n, H, Ip});
  TensorView dns = w.allocate(DType::kF32, Shape{n, Hb, Ipb});
  std::vector<std::byte> codes;
  std::vector<float> scales;
  for (int64_t e = 0; e < n; ++e) {
    const std::string g = modules[e] + "gate_proj", u = modules[e] + "up_proj", d = modules[e] + "down_proj";
    // Generated (dummy) codes are made where they live; the scales are scalars.
    const bool codes_filled = Ip == I && fill_on_device(w, {{g + ".weight", expert_view(gu, e).slice_rows(0, I)},
                                                            {u + ".weight", expert_view(gu, e).slice_rows(I, 2 * I)},
                                                            {d + ".weight", expert_view(dn, e)}});
    if (!codes_filled) codes.assign(static_cast<size_t>(2 * Ip * H), std::byte{0});
    scales.assign(static_cast<size_t>(2 * Ipb * Hb), 0.0f);
    for (int part = 0; part < 2; ++part) {
      const std::string& mod = part == 0 ? g : u;
      if (!codes_filled) {
        auto q = w.read_host(mod + ".weight");
        std::memcpy(codes.data() + part * Ip * H, q.data(), static_cast<size_t>(I * H));
      }
      std::fill_n(scales.begin() + part * Ipb * Hb, Ipb * Hb, scalar(w, mod + ".weight_scale"));
      scalar(w, mod + ".input_scale");  // validated like every scale, unused (see above)
    }
    if (!codes_filled) w.backend().copy_to_device(expert_view(gu, e).data(), codes.data(), codes.size());
    w.backend().copy_to_device(expert_view(gus, e).data(), scales.data(), scales.size() * 4);
    if (!codes_filled) {
      auto q = w.read_host(d + ".weight");
      codes.assign(static_cast<size_t>(H * Ip), std::byte{0});
      for (int64_t h = 0; h < H; ++h) std::memcpy(codes.data() + h * Ip, q.data() + h * I, static_cast<size_t>(I));
      w.backend().copy_to_device(expert_view(dn, e).data(), codes.data(), codes.size());
    }
    scales.assign(static_cast<size_t>(Hb * Ipb), scalar(w, d + ".weight_scale"));
    scalar(w, d + ".input_scale");
    w.backend().copy_to_device(expert_view(dns, e).data(), scales.data(), scales.size() * 4);
  }
  return {LinearWeight::fp8_block(gu, gus), LinearWeight::fp8_block(dn, dns), Ip};
}

}  // namespace

StackedExperts load_fused_experts(WeightLoader& w, const std::string& prefix) {
  const TensorInfo& gi = w.info(prefix + "gate_up_proj");
  const TensorInfo& di = w.info(prefix + "down_proj");
  if (gi.dtype == DType::kF8E4M3 || di.dtype == DType::kF8E4M3)
    fail(ErrorCode::kUnsupported, "{}: fused FP8 experts ({}gate_up_proj) are not supported", gi.origin, prefix);
  if (gi.shape.rank() != 3 || di.shape.rank() != 3 || gi.shape[1] % 2 != 0 || di.shape[0] != gi.shape[0] ||
      di.shape[1] != gi.shape[2] || di.shape[2] * 2 != gi.shape[1]) {
    fail(ErrorCode::kCorruptData, "{}: {}gate_up_proj {} and down_proj {} are not [E, 2I, H] and [E, H, I]",
         gi.origin, prefix, gi.shape.str(), di.shape.str());
  }
  return {LinearWeight::bf16(w.load(gi.name, DType::kBF16)), LinearWeight::bf16(w.load(di.name, DType::kBF16)),
          di.shape[2]};
}

StackedExperts load_per_expert(WeightLoader& w, const std::vector<std::string>& modules) {
  HYLLM_CHECK(!modules.empty(), "load_per_expert with no modules");
  const WeightFormat format = linear_format(w, modules[0] + "gate_proj");
  const TensorInfo& gi = w.info(modules[0] + "gate_proj.weight");
  if (gi.shape.rank() != 2) expect_shape(gi, -1, -1);
  const int64_t I = gi.shape[0], H = gi.shape[1];
  for (const std::string& m : modules) {
    for (const char* part : {"gate_proj", "up_proj", "down_proj"}) {
      const std::string mod = m + part;
      if (linear_format(w, mod) != format)
        fail(ErrorCode::kUnsupported, "{}: experts of one layer stored in different formats ({} and {})", mod,
             weight_format_name(linear_format(w, mod)), weight_format_name(format));
      const bool down = part[0] == 'd';
      expect_shape(w.info(mod + ".weight"), down ? H : I, down ? I : H);
    }
  }
  switch (format) {
    case WeightFormat::kBf16: return load_bf16(w, modules, I, H);
    case WeightFormat::kFp8Block:
      if (gi.dtype != DType::kF8E4M3) return load_online_fp8_block(w, modules, I, H);
      return load_fp8_block(w, modules, I, H);
    case WeightFormat::kFp8Tensor: return load_fp8_tensor(w, modules, I, H);
  }
  fail(ErrorCode::kInternal, "unknown weight format");
}

LinearWeight unstack(const LinearWeight& s, int64_t e) {
  LinearWeight out{s.format, expert_view(s.weight, e), {}, {}};
  if (s.format == WeightFormat::kFp8Block) out.weight_scale = expert_view(s.weight_scale, e);
  if (s.format == WeightFormat::kFp8Tensor) {
    out.weight_scale = s.weight_scale.slice_rows(e, e + 1);
    out.input_scale = s.input_scale.slice_rows(e, e + 1);
  }
  return out;
}

TensorView load_router(WeightLoader& w, const std::string& router, const std::string& shared_gate) {
  const TensorInfo& ri = w.info(router);
  if (ri.shape.rank() != 2) expect_shape(ri, -1, -1);
  const int64_t E = ri.shape[0], H = ri.shape[1];
  const bool gate = !shared_gate.empty();
  if (gate) expect_shape(w.info(shared_gate), 1, H);
  TensorView t = w.allocate(DType::kBF16, Shape{E + (gate ? 1 : 0), H});
  load_bf16_into(w, router, t.slice_rows(0, E));
  if (gate) load_bf16_into(w, shared_gate, t.slice_rows(E, E + 1));
  return t;
}

}  // namespace hyllm
