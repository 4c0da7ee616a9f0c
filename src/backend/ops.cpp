// Validation and dispatch of the dense ops (linear, embedding, rows, norms,
// MLP, MoE). Attention and GDN ops are in ops_mixers.cpp, the collectives in
// ops_collective.cpp.
#include "backend/ops.h"

#include <tuple>

#include "backend/backend.h"
#include "backend/kernels.h"
#include "backend/ops_check.h"

namespace hyllm {

using ops_detail::kAny;
using ops_detail::OpCheck;

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16: return "bf16";
    case WeightFormat::kFp8Block: return "fp8-block";
    case WeightFormat::kFp8Tensor: return "fp8-tensor";
  }
  return "unknown";
}

const char* act_quant_mode_name(ActQuantMode m) {
  switch (m) {
    case ActQuantMode::kNone: return "none";
    case ActQuantMode::kGroup128: return "per token per 128 columns";
    case ActQuantMode::kStatic: return "with a static scale";
  }
  return "unknown";
}

ActQuantMode act_quant_mode_for(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16: return ActQuantMode::kNone;
    case WeightFormat::kFp8Block: return ActQuantMode::kGroup128;
    case WeightFormat::kFp8Tensor: return ActQuantMode::kStatic;
  }
  return ActQuantMode::kNone;
}

namespace {
// Validates an optional FP8 output of a producer op and counts it.
void check_fp8_out(Backend& be, const OpCheck& c, const Fp8Activation& out, int64_t rows, int64_t cols) {
  if (out.empty()) return;
  c.require(out.mode != ActQuantMode::kNone, "out_fp8 has no mode");
  c.fp8_activation("out_fp8", out, out.mode, rows, cols);
  ++be.counters().fp8_quantizations;
}
}  // namespace

void linear(Backend& be, const LinearArgs& a) {
  OpCheck c(be.device(), "linear");
  const ActQuantMode mode = act_quant_mode_for(a.w.format);
  const bool quantised = !a.xq.empty();
  c.require(!quantised || mode != ActQuantMode::kNone, "a quantised input (xq) needs fp8 weights");
  if (quantised) {
    c.fp8_activation("xq", a.xq, mode, kAny, kAny);
    c.optional("x", a.x, {DType::kBF16}, {a.xq.rows(), a.xq.cols()});
  } else {
    c.tensor("x", a.x, {DType::kBF16}, {kAny, kAny});
    if (mode != ActQuantMode::kNone) ++be.counters().linear_self_quantizations;
  }
  const int64_t M = quantised ? a.xq.rows() : a.x.dim(0), K = quantised ? a.xq.cols() : a.x.dim(1);
  c.weight("w", a.w, kAny, K);
  c.tensor("out", a.out, {DType::kBF16, DType::kF32}, {M, a.w.out_features()});
  if (a.out_rows_padded || a.xq.rows_padded) {
    // The rows past M that the kernel may write (see kActivationRowPad) must
    // not be another tensor's.
    const size_t out_bytes = static_cast<size_t>(a.out_rows_padded ? padded_rows(M) : M) * a.w.out_features() *
                             dtype_size(a.out.dtype());
    const size_t q_bytes = quantised ? static_cast<size_t>(a.xq.rows_padded ? padded_rows(M) : M) * K : 0;
    const char* out = a.out_rows_padded ? "out (with its row room)" : "out";
    const char* q = a.xq.rows_padded ? "xq.q (with its row room)" : "xq.q";
    c.disjoint(out, a.out.data(), out_bytes, q, a.xq.q.data(), q_bytes);
    c.disjoint(out, a.out.data(), out_bytes, "x", a.x.data(), a.x.nbytes());
    c.disjoint(q, a.xq.q.data(), q_bytes, "x", a.x.data(), a.x.nbytes());
    c.disjoint(q, a.xq.q.data(), q_bytes, "xq.scale", a.xq.scale.data(), quantised ? a.xq.scale.nbytes() : 0);
  }
  be.kernels().linear(a);
}

void quantize_fp8(Backend& be, const QuantizeFp8Args& a) {
  OpCheck c(be.device(), "quantize_fp8");
  c.require(!a.out.empty(), "out has no quantisation mode");
  c.cols("x", a.x, {DType::kBF16}, a.out.rows(), a.out.cols());
  c.fp8_activation("out", a.out, a.out.mode, a.x.rows(), a.x.width);
  ++be.counters().fp8_quantizations;
  be.kernels().quantize_fp8(a);
}

void embedding(Backend& be, const EmbeddingArgs& a) {
  OpCheck c(be.device(), "embedding");
  c.tensor("ids", a.ids, {DType::kI32}, {kAny});
  c.tensor("table", a.table, {DType::kBF16}, {kAny, kAny});
  c.tensor("out", a.out, {DType::kBF16}, {a.ids.dim(0), a.table.dim(1)});
  c.require(!a.part_of_vocab || a.vocab_start >= 0, "vocab_start {} is negative", a.vocab_start);
  c.require(a.part_of_vocab || a.vocab_start == 0, "vocab_start {} without part_of_vocab", a.vocab_start);
  be.kernels().embedding(a);
}

void gather_rows(Backend& be, const GatherRowsArgs& a) {
  OpCheck c(be.device(), "gather_rows");
  c.require(a.src.rank() == 2, "src has shape {}, expected [T, W]", a.src.shape().str());
  c.tensor("src", a.src, {a.src.dtype()}, {kAny, kAny});
  c.tensor("indices", a.indices, {DType::kI32}, {kAny});
  c.tensor("out", a.out, {a.src.dtype()}, {a.indices.dim(0), a.src.dim(1)});
  be.kernels().gather_rows(a);
}

void rms_norm(Backend& be, const RmsNormArgs& a) {
  OpCheck c(be.device(), "rms_norm");
  c.tensor("x", a.x, {DType::kBF16}, {kAny, kAny});
  const int64_t T = a.x.dim(0), H = a.x.dim(1);
  c.tensor("weight", a.weight, {DType::kBF16, DType::kF32}, {H});
  if (a.out_fp8.empty()) c.tensor("out", a.out, {DType::kBF16}, {T, H});
  else c.optional("out", a.out, {DType::kBF16}, {T, H});
  check_fp8_out(be, c, a.out_fp8, T, H);
  bool rin = c.optional("residual_in", a.residual_in, {DType::kBF16}, {T, H});
  bool rout = c.optional("residual_out", a.residual_out, {DType::kBF16}, {T, H});
  c.require(a.out.empty() || (!(rin && a.out.data() == a.residual_in.data()) &&
                              !(rout && a.out.data() == a.residual_out.data())),
            "out must not alias the residual");
  c.require(a.eps > 0.0f, "eps must be positive, got {}", a.eps);
  be.kernels().rms_norm(a);
}

void gated_rms_norm(Backend& be, const GatedRmsNormArgs& a) {
  OpCheck c(be.device(), "gated_rms_norm");
  c.require(a.num_heads > 0 && a.head_dim > 0, "num_heads {} and head_dim {} must be positive", a.num_heads,
            a.head_dim);
  const int64_t W = a.num_heads * a.head_dim;
  c.tensor("x", a.x, {DType::kBF16}, {kAny, W});
  const int64_t T = a.x.dim(0);
  c.cols("z", a.z, {DType::kBF16}, T, W);
  c.tensor("weight", a.weight, {DType::kBF16, DType::kF32}, {a.head_dim});
  if (a.out_fp8.empty()) c.tensor("out", a.out, {DType::kBF16}, {T, W});
  else c.optional("out", a.out, {DType::kBF16}, {T, W});
  check_fp8_out(be, c, a.out_fp8, T, W);
  c.require(a.eps > 0.0f, "eps must be positive, got {}", a.eps);
  be.kernels().gated_rms_norm(a);
}

void fill_random(Backend& be, const FillRandomArgs& a) {
  OpCheck c(be.device(), "fill_random");
  c.require(a.dst.dtype() == DType::kBF16 || a.dst.dtype() == DType::kF32 || a.dst.dtype() == DType::kF8E4M3,
            "dst dtype {} is not bf16, f32 or float8_e4m3fn", dtype_name(a.dst.dtype()));
  c.require(a.dst.device() == be.device(), "dst is not on the backend's device");
  if (a.dst.numel() == 0) return;
  c.require(a.dst.data() != nullptr, "dst has no data");
  be.kernels().fill_random(a);
}

void swiglu(Backend& be, const SwigluArgs& a) {
  OpCheck c(be.device(), "swiglu");
  const int64_t T = a.x.rows(), I = a.x.width / 2;
  c.require(a.x.width % 2 == 0, "x has an odd width {}", a.x.width);
  if (a.out_fp8.empty()) c.tensor("out", a.out, {DType::kBF16}, {T, I});
  else c.optional("out", a.out, {DType::kBF16}, {T, I});
  c.cols("x", a.x, {DType::kBF16}, T, 2 * I);
  check_fp8_out(be, c, a.out_fp8, T, I);
  be.kernels().swiglu(a);
}

void moe_route(Backend& be, const MoeRouteArgs& a) {
  OpCheck c(be.device(), "moe_route");
  c.tensor("logits", a.logits, {DType::kBF16, DType::kF32}, {kAny, kAny});
  const int64_t T = a.logits.dim(0), E = a.logits.dim(1);
  c.require(a.top_k >= 1 && a.top_k <= E, "top_k {} must be in [1, {}]", a.top_k, E);
  c.tensor("topk_ids", a.topk_ids, {DType::kI32}, {T, a.top_k});
  c.tensor("topk_weights", a.topk_weights, {DType::kF32}, {T, a.top_k});
  be.kernels().moe_route(a);
}

namespace {
// The stacked expert weights of moe (see MoeExpertWeights); returns I.
int64_t check_experts(const OpCheck& c, const MoeExpertWeights& w, int64_t E, int64_t H) {
  c.require(w.gate_up.weight.rank() == 3 && w.down.weight.rank() == 3,
            "experts: weights must be [E, 2I, H] and [E, H, I], got {} and {}", w.gate_up.weight.shape().str(),
            w.down.weight.shape().str());
  c.require(w.gate_up.format == w.down.format, "experts: gate_up is {} but down is {}",
            weight_format_name(w.gate_up.format), weight_format_name(w.down.format));
  const int64_t I = w.intermediate();
  c.require(I > 0, "experts: intermediate size 0");
  if (w.gate_up.format == WeightFormat::kFp8Block)
    c.require(I % kFp8BlockSize == 0, "experts: block-fp8 intermediate size {} is not a multiple of {}", I,
              kFp8BlockSize);
  const DType wd = w.gate_up.format == WeightFormat::kBf16 ? DType::kBF16 : DType::kF8E4M3;
  for (auto [lw, N, K] : {std::tuple{&w.gate_up, 2 * I, H}, std::tuple{&w.down, H, I}}) {
    c.tensor("experts.weight", lw->weight, {wd}, {E, N, K});
    if (lw->format == WeightFormat::kFp8Block) {
      c.tensor("experts.weight_scale", lw->weight_scale, {DType::kF32},
               {E, (N + kFp8BlockSize - 1) / kFp8BlockSize, (K + kFp8BlockSize - 1) / kFp8BlockSize});
    } else if (lw->format == WeightFormat::kFp8Tensor) {
      c.tensor("experts.weight_scale", lw->weight_scale, {DType::kF32}, {E});
      c.tensor("experts.input_scale", lw->input_scale, {DType::kF32}, {E});
    }
  }
  return I;
}
}  // namespace

void moe(Backend& be, const MoeArgs& a) {
  OpCheck c(be.device(), "moe");
  c.tensor("x", a.x, {DType::kBF16}, {kAny, kAny});
  const int64_t T = a.x.dim(0), H = a.x.dim(1);
  c.tensor("router", a.router, {DType::kBF16}, {kAny, H});
  const int64_t E = a.router.dim(0);
  c.require(E > 0 && a.top_k >= 1 && a.top_k <= E, "top_k {} must be in [1, {}]", a.top_k, E);
  check_experts(c, a.experts, E, H);
  if (!a.shared.empty()) {
    const int64_t Is = a.shared.intermediate();
    c.weight("shared.gate_up", a.shared.gate_up, 2 * Is, H);
    c.weight("shared.down", a.shared.down, H, Is);
    c.require(a.shared.gate_up.format == a.shared.down.format, "shared: gate_up is {} but down is {}",
              weight_format_name(a.shared.gate_up.format), weight_format_name(a.shared.down.format));
    c.optional("shared.gate", a.shared.gate, {DType::kBF16}, {1, H});
  } else {
    c.require(a.shared.gate.empty(), "shared.gate without a shared expert");
  }
  c.tensor("out", a.out, {DType::kBF16}, {T, H});
  c.optional("topk_ids", a.topk_ids, {DType::kI32}, {T, a.top_k});
  c.optional("topk_weights", a.topk_weights, {DType::kF32}, {T, a.top_k});
  c.optional("expert_load", a.expert_load, {DType::kI32}, {E});
  const WeightFormat ef = a.experts.gate_up.format;
  const WeightFormat sf = a.shared.empty() ? WeightFormat::kBf16 : a.shared.gate_up.format;
  const bool reads_xq = ef == WeightFormat::kFp8Block || sf == WeightFormat::kFp8Block;
  if (!a.xq.empty()) {
    c.require(reads_xq, "xq is given but no expert is block fp8");
    c.fp8_activation("xq", a.xq, ActQuantMode::kGroup128, T, H);
  }
  // The op's own quantisations of x (per-tensor FP8 experts have their own
  // input scales; block FP8 without xq), and of the SwiGLU outputs that FP8
  // down projections read (one producer quantisation).
  if (ef == WeightFormat::kFp8Tensor || sf == WeightFormat::kFp8Tensor || (reads_xq && a.xq.empty()))
    ++be.counters().linear_self_quantizations;
  if (ef != WeightFormat::kBf16 || sf != WeightFormat::kBf16) ++be.counters().fp8_quantizations;
  be.kernels().moe(a);
}

}  // namespace hyllm
