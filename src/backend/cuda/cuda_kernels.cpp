// The CUDA kernel table: construction, scratch, and the dense ops (linear,
// embedding, rows, norms, SwiGLU). Mixers and MoE are in their own files.
#include "backend/cuda/cuda_kernels.h"

#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch/attention.h"
#include "backend/cuda/launch/bf16_gemv.h"
#include "backend/cuda/launch/dense.h"
#include "backend/cuda/launch/device.h"
#include "backend/cuda/launch/fill.h"
#include "backend/cuda/launch/moe.h"
#include "backend/cuda/launch/fp8.h"
#include "backend/cuda/launch/quantize.h"

namespace hyllm {

using namespace cuda_detail;

namespace cuda_detail {
void check_launch(const char* op) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) fail(ErrorCode::kInternal, "cuda op {}: launch failed: {}", op, cudaGetErrorString(err));
}
int to_int(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    fail(ErrorCode::kUnsupported, "cuda backend: {} = {} does not fit the kernels' 32-bit sizes", what, v);
  }
  return static_cast<int>(v);
}
cuda::Fp8Out fp8_out(const Fp8Activation& a) {
  cuda::Fp8Out o;
  if (a.empty()) return o;
  o.q = a.q.data_as<uint8_t>();
  o.group_scales = a.mode == ActQuantMode::kGroup128;
  if (o.group_scales)
    o.scale = a.scale.data_as<float>();
  else
    o.static_scale = a.scale.data_as<const float>();
  o.rows = to_int(a.rows(), "rows");
  o.cols = to_int(a.cols(), "columns");
  return o;
}
}  // namespace cuda_detail

CudaKernels::CudaKernels(cudaStream_t stream, int device_index) : stream_(stream) {
  HYLLM_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device_index));
  HYLLM_CUDA_CHECK(cudaMalloc(&moe_counter_, sizeof(int32_t)));
  HYLLM_CUDA_CHECK(cudaMemset(moe_counter_, 0, sizeof(int32_t)));
  const size_t attn_counter_bytes = sizeof(int32_t) * cuda::paged_attention_split_counters(num_sms_);
  HYLLM_CUDA_CHECK(cudaMalloc(&attn_split_counters_, attn_counter_bytes));
  HYLLM_CUDA_CHECK(cudaMemset(attn_split_counters_, 0, attn_counter_bytes));
  sm90a_ = cuda::sm90a_kernels_supported(device_index);
}

CudaKernels::~CudaKernels() {
  cudaStreamSynchronize(stream_);
  cudaFree(scratch_);
  cudaFree(moe_counter_);
  cudaFree(attn_split_counters_);
}

void* CudaKernels::scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  HYLLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  cudaFree(scratch_);
  scratch_ = nullptr;
  ++scratch_generation_;
  const size_t grown = std::max(bytes, scratch_bytes_ + scratch_bytes_ / 2);
  const size_t rounded = (grown + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);
  if (cudaMalloc(&scratch_, rounded) != cudaSuccess) {
    cudaGetLastError();
    scratch_bytes_ = 0;
    fail(ErrorCode::kOutOfMemory, "cuda backend: scratch of {} bytes failed", rounded);
  }
  scratch_bytes_ = rounded;
  return scratch_;
}

void CudaKernels::poison_scratch(uint8_t byte) {
  if (scratch_ != nullptr) HYLLM_CUDA_CHECK(cudaMemsetAsync(scratch_, byte, scratch_bytes_, stream_));
}

void CudaKernels::linear(const LinearArgs& a) {
  if (a.w.format == WeightFormat::kBf16) {
    cuda::Bf16GemvParams g;
    g.x = bf(a.x);
    g.w = bf(a.w.weight);
    g.out = a.out.data();
    g.out_f32 = is_f32(a.out);
    const bool narrow = a.x.dim(0) <= cuda::kBf16GemvMaxRows && a.w.out_features() <= cuda::kBf16GemvMaxOut &&
                        a.x.dim(1) <= std::numeric_limits<int32_t>::max();
    if (narrow) {
      g.M = static_cast<int>(a.x.dim(0));
      g.N = static_cast<int>(a.w.out_features());
      g.K = static_cast<int>(a.x.dim(1));
    }
    if (narrow && cuda::bf16_gemv_fits(g)) {
      cuda::launch_bf16_gemv(g, stream_);
      check_launch("linear (bf16 gemv)");
      return;
    }
    gemm_.run(bf(a.x), bf(a.w.weight), a.out.data(), is_f32(a.out), a.x.dim(0), a.w.out_features(), a.x.dim(1),
              stream_);
    return;
  }
  if (!a.xq.empty()) return linear_fp8(a.xq, a.w, a.out, a.out_rows_padded);
  // A bf16 input to an FP8 weight: quantised here into scratch (the slow path
  // that producers writing FP8 themselves avoid).
  const int64_t M = a.x.dim(0), K = a.x.dim(1);
  Fp8Activation xq;
  xq.mode = act_quant_mode_for(a.w.format);
  const bool group = xq.mode == ActQuantMode::kGroup128;
  const int64_t groups = (K + 127) / 128;
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  // The codes get the row room of the model's activations, and the scales
  // room behind them for linear_fp8's copy at a padded pitch (see there):
  // the arena must not move under the codes while it makes that copy.
  const size_t q_bytes = aligned(static_cast<size_t>(padded_rows(M) * K));
  const size_t s_bytes = group ? aligned(static_cast<size_t>(groups * M) * sizeof(float)) : 0;
  const size_t packed_bytes = group ? static_cast<size_t>(groups * padded_rows(M)) * sizeof(float) : 0;
  char* base = static_cast<char*>(scratch(q_bytes + s_bytes + packed_bytes));
  xq.q = TensorView(base, DType::kF8E4M3, Shape{M, K}, a.x.device());
  xq.rows_padded = true;
  xq.scale = group ? TensorView(base + q_bytes, DType::kF32, Shape{groups, M}, a.x.device()) : a.w.input_scale;
  cuda::QuantizeFp8Params qp;
  qp.x = bf(a.x);
  qp.x_stride = K;
  qp.out = fp8_out(xq);
  cuda::launch_quantize_fp8(qp, stream_);
  check_launch("linear (input quantisation)");
  linear_fp8(xq, a.w, a.out, a.out_rows_padded);
}

// cuBLASLt's block-scaled kernels take row counts that are multiples of
// kFp8BlockRowMultiple only; the row room of ops.h covers the next multiple.
static_assert(kActivationRowPad % cuda::kFp8BlockRowMultiple == 0);

void CudaKernels::linear_fp8(const Fp8Activation& xq, const LinearWeight& w, const TensorView& out,
                             bool out_rows_padded) {
  const int64_t M = xq.rows(), N = w.out_features(), K = xq.cols();
  const bool block = w.format == WeightFormat::kFp8Block;
  const uint8_t* x = xq.q.data_as<const uint8_t>();
  const float* xs = xq.scale.data_as<const float>();
  const uint8_t* wq = w.weight.data_as<const uint8_t>();
  const float* ws = w.weight_scale.data_as<const float>();
  const auto scales = block ? cuda::GemmRunner::Fp8Scales::kBlock : cuda::GemmRunner::Fp8Scales::kTensor;
  const int64_t gemv_rows = block ? cuda::kFp8GemvMaxRowsBlock : cuda::kFp8GemvMaxRowsTensor;
  constexpr int64_t kMultiple = cuda::kFp8BlockRowMultiple;
  // Decode rows stream the weights through fp8_gemv; more rows go to
  // cuBLASLt, unless it has no algorithm for the shape. Its block-scaled
  // kernels take row counts that are multiples of kMultiple only (it is not
  // asked for others). With row room in both the codes and the output, such
  // rows run rounded up to the multiple as one GEMM: the extra rows read zero
  // codes and scales (written here into the room) and write zeros into the
  // output's room, and the weights are read once.
  // Without the room, beyond one fp8_gemv pass (which would stream the
  // weights once per pass) the leading multiple goes to cuBLASLt and the
  // last rows to fp8_gemv, one more read of the weights; up to one pass,
  // fp8_gemv alone reads them once. The GEMM of either reads its scales
  // copied to its row pitch.
  const bool odd_rows = block && M % kMultiple != 0;
  if (M > gemv_rows && !odd_rows && gemm_.run_fp8(x, xs, wq, ws, scales, out.data(), is_f32(out), M, N, K, stream_))
    return;
  const bool whole = odd_rows && M > gemv_rows && xq.rows_padded && out_rows_padded;
  int64_t first_gemv_row = 0;
  if ((whole || (odd_rows && M > cuda::kFp8GemvRowsPerPass)) && cuda::GemmRunner::block_shape_trusted(N, K)) {
    const int64_t gemm_rows = whole ? (M + kMultiple - 1) / kMultiple * kMultiple : M / kMultiple * kMultiple;
    const int64_t groups = (K + 127) / 128;
    const size_t packed_bytes = static_cast<size_t>(groups * gemm_rows) * sizeof(float);
    // linear() quantises into scratch and leaves room for this behind the
    // scales; an activation elsewhere leaves the arena free.
    const char* arena = static_cast<const char*>(scratch_);
    const char* scale_end = reinterpret_cast<const char*>(xs + groups * M);
    const bool in_arena = arena != nullptr && scale_end > arena && scale_end <= arena + scratch_bytes_;
    const size_t offset = in_arena ? (static_cast<size_t>(scale_end - arena) + 255) / 256 * 256 : 0;
    char* base = static_cast<char*>(scratch(offset + packed_bytes));
    HYLLM_CHECK(!in_arena || base == arena, "linear_fp8: the scratch arena moved under its input");
    float* packed = reinterpret_cast<float*>(base + offset);
    cuda::PackGroupScalesParams pack;
    pack.src = xs;
    pack.dst = packed;
    pack.rows = to_int(M, "rows");
    pack.groups = to_int(groups, "column groups");
    pack.ld = to_int(gemm_rows, "rows");
    if (whole) {
      pack.room_codes = xq.q.data_as<uint8_t>() + M * K;
      pack.room_bytes = (gemm_rows - M) * K;
    }
    cuda::launch_pack_group_scales(pack, stream_);
    check_launch("linear (scales at the GEMM's row pitch)");
    if (gemm_.run_fp8(x, packed, wq, ws, scales, out.data(), is_f32(out), gemm_rows, N, K, stream_)) {
      if (whole) return;
      first_gemv_row = gemm_rows;
    }
  }
  cuda::Fp8GemvParams p;
  p.w = wq;
  p.w_scale = ws;
  p.x = x;
  p.x_scale = xs;
  p.block_scales = block;
  p.out = out.data();
  p.out_f32 = is_f32(out);
  p.M = to_int(M, "rows");
  p.N = to_int(N, "out features");
  p.K = to_int(K, "in features");
  if (first_gemv_row > 0) {
    p.x += first_gemv_row * K;
    p.x_scale += first_gemv_row;
    p.x_scale_ld = p.M;
    p.M -= static_cast<int>(first_gemv_row);
    p.out = static_cast<char*>(p.out) + first_gemv_row * N * (p.out_f32 ? 4 : 2);
  }
  cuda::launch_fp8_gemv(p, num_sms_, stream_);
  check_launch("linear (fp8, few rows)");
}

void CudaKernels::quantize_fp8(const QuantizeFp8Args& a) {
  cuda::QuantizeFp8Params p;
  p.x = col(a.x);
  p.x_stride = a.x.stride();
  p.out = fp8_out(a.out);
  cuda::launch_quantize_fp8(p, stream_);
  check_launch("quantize_fp8");
}

void CudaKernels::embedding(const EmbeddingArgs& a) {
  cuda::EmbeddingParams p;
  p.ids = i32(a.ids);
  p.table = bf(a.table);
  p.out = bf_mut(a.out);
  p.tokens = to_int(a.ids.dim(0), "tokens");
  p.vocab = a.table.dim(0);
  p.vocab_start = a.part_of_vocab ? a.vocab_start : 0;
  p.width = to_int(a.table.dim(1), "hidden size");
  cuda::launch_embedding(p, stream_);
  check_launch("embedding");
}

void CudaKernels::gather_rows(const GatherRowsArgs& a) {
  cuda::GatherRowsParams p;
  p.src = a.src.data();
  p.indices = i32(a.indices);
  p.out = a.out.data();
  p.rows = to_int(a.indices.dim(0), "rows");
  p.src_rows = a.src.dim(0);
  p.row_bytes = a.src.dim(1) * static_cast<int64_t>(dtype_size(a.src.dtype()));
  cuda::launch_gather_rows(p, stream_);
  check_launch("gather_rows");
}

void CudaKernels::fill_random(const FillRandomArgs& a) {
  const cuda::FillType type = a.dst.dtype() == DType::kF32    ? cuda::FillType::kF32
                              : a.dst.dtype() == DType::kBF16 ? cuda::FillType::kBF16
                                                              : cuda::FillType::kE4M3;
  cuda::launch_fill_random(a.dst.data(), type, static_cast<size_t>(a.dst.numel()), a.stream,
                           a.distribution == RandomDistribution::kNormal, a.offset, a.scale, stream_);
  check_launch("fill_random");
}

void CudaKernels::quantize_weight_fp8(const QuantizeWeightFp8Args& a) {
  cuda::launch_quantize_weight_fp8(bf(a.w), static_cast<size_t>(a.w.numel()), a.out.data_as<uint8_t>(),
                                   a.scale.data_as<float>(), static_cast<size_t>(a.scale.numel()),
                                   static_cast<uint32_t*>(scratch(sizeof(uint32_t))), stream_);
  check_launch("quantize_weight_fp8");
}

void CudaKernels::rms_norm(const RmsNormArgs& a) {
  cuda::RmsNormParams p;
  p.x = bf(a.x);
  p.weight = a.weight.data();
  p.weight_f32 = is_f32(a.weight);
  p.out = a.out.empty() ? nullptr : bf_mut(a.out);
  p.fp8 = fp8_out(a.out_fp8);
  p.residual_in = a.residual_in.empty() ? nullptr : bf(a.residual_in);
  p.residual_out = a.residual_out.empty() ? nullptr : bf_mut(a.residual_out);
  p.rows = to_int(a.x.dim(0), "rows");
  p.width = to_int(a.x.dim(1), "width");
  if (p.width > 24 * 1024) fail(ErrorCode::kUnsupported, "rms_norm: width {} exceeds the cuda kernel's 24576", p.width);
  p.eps = a.eps;
  p.plus_one = a.plus_one;
  cuda::launch_rms_norm(p, stream_);
  check_launch("rms_norm");
}

void CudaKernels::gated_rms_norm(const GatedRmsNormArgs& a) {
  cuda::GatedRmsNormParams p;
  p.x = bf(a.x);
  p.z = col(a.z);
  p.z_stride = a.z.stride();
  p.weight = a.weight.data();
  p.weight_f32 = is_f32(a.weight);
  p.out = a.out.empty() ? nullptr : bf_mut(a.out);
  p.fp8 = fp8_out(a.out_fp8);
  p.rows = to_int(a.x.dim(0), "rows");
  p.num_heads = to_int(a.num_heads, "num_heads");
  p.head_dim = to_int(a.head_dim, "head_dim");
  p.eps = a.eps;
  cuda::launch_gated_rms_norm(p, stream_);
  check_launch("gated_rms_norm");
}

void CudaKernels::swiglu(const SwigluArgs& a) {
  cuda::SwigluParams p;
  p.x = col(a.x);
  p.x_stride = a.x.stride();
  p.out = a.out.empty() ? nullptr : bf_mut(a.out);
  p.fp8 = fp8_out(a.out_fp8);
  p.rows = to_int(a.x.rows(), "rows");
  p.inter = to_int(a.x.width / 2, "intermediate size");
  cuda::launch_swiglu(p, stream_);
  check_launch("swiglu");
}

}  // namespace hyllm
