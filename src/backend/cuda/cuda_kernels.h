#pragma once
// The CUDA backend's kernel table: every op of ops.h on the GPU, enqueued on
// the backend's one stream with no host synchronisation. Each entry turns the
// validated TensorViews into the plain launch structs of launch/*.h and calls
// the .cu launchers. Ops need no host read of device data; scratch memory is
// one growing device arena reused by every op.

#include <cuda_runtime.h>

#include <memory>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/kernels.h"

namespace hyllm {

namespace cuda {
struct MoeExpertPtrs;
}

class CudaKernels final : public Kernels {
 public:
  CudaKernels(cudaStream_t stream, int device_index);
  ~CudaKernels() override;

  void linear(const LinearArgs& a) override;
  void quantize_fp8(const QuantizeFp8Args& a) override;
  void embedding(const EmbeddingArgs& a) override;
  void gather_rows(const GatherRowsArgs& a) override;
  void fill_random(const FillRandomArgs& a) override;
  void quantize_weight_fp8(const QuantizeWeightFp8Args& a) override;
  void rms_norm(const RmsNormArgs& a) override;
  void gated_rms_norm(const GatedRmsNormArgs& a) override;
  void attention_prep(const AttentionPrepArgs& a) override;
  void paged_attention(const PagedAttentionArgs& a) override;
  void gdn_conv(const GdnConvArgs& a) override;
  void gated_delta_rule(const GatedDeltaRuleArgs& a) override;
  void select_state(const SelectStateArgs& a) override;
  void swiglu(const SwigluArgs& a) override;
  void moe_route(const MoeRouteArgs& a) override;
  void moe(const MoeArgs& a) override;

  cudaStream_t stream() const { return stream_; }
  int num_sms() const { return num_sms_; }
  // Device scratch of at least `bytes`, valid until the next op is enqueued.
  // Growing it waits for the stream (the old arena may still be in use), so a
  // warm-up step sizes it before any graph capture.
  void* scratch(size_t bytes);
  void poison_scratch(uint8_t byte);
  // Counts the arena's moves: a graph recorded under another count points
  // into freed memory.
  uint64_t scratch_generation() const { return scratch_generation_; }
  const CudaMoeCounts& moe_counts() const { return moe_counts_; }
  void allow_moe_small_tma(bool allow) { moe_small_tma_ = allow; }
  void allow_warpgroup_attention(bool allow) { warpgroup_attention_ = allow; }

 protected:
  const char* table_name() const override { return "the cuda backend"; }

 private:
  // Rows [t0, t0 + T) of the op's tokens (a holds them as rows [0, T)).
  void moe_small(const MoeArgs& a, const cuda::MoeExpertPtrs& w, int64_t t0);
  void moe_grouped(const MoeArgs& a, const cuda::MoeExpertPtrs& w);
  // The FP8 linear on quantised input (the CUDA half of linear());
  // out_rows_padded as LinearArgs has it.
  void linear_fp8(const Fp8Activation& xq, const LinearWeight& w, const TensorView& out, bool out_rows_padded);

  cudaStream_t stream_;
  int num_sms_ = 132;
  cuda::GemmRunner gemm_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  uint64_t scratch_generation_ = 0;
  // The small MoE router's block counter (zero between launches).
  int32_t* moe_counter_ = nullptr;
  // The split-KV attention merge's per-group block counters (zero between launches).
  int32_t* attn_split_counters_ = nullptr;
  // The device runs this build's sm_90a kernels (warpgroup MMAs, tensor maps).
  bool sm90a_ = false;
  bool moe_small_tma_ = true;  // cuda_backend.h cuda_allow_moe_small_tma
  bool warpgroup_attention_ = true;  // cuda_backend.h cuda_allow_warpgroup_attention
  CudaMoeCounts moe_counts_;
};

namespace cuda_detail {
// Throws kInternal if the last launch failed.
void check_launch(const char* op);
inline bool is_f32(const TensorView& t) { return t.dtype() == DType::kF32; }
inline const uint16_t* bf(const TensorView& t) { return t.data_as<const uint16_t>(); }
inline uint16_t* bf_mut(const TensorView& t) { return t.data_as<uint16_t>(); }
inline const uint16_t* col(const ColSlice& s) { return s.tensor.data_as<const uint16_t>() + s.offset; }
inline const int32_t* i32(const TensorView& t) { return t.data_as<const int32_t>(); }
int to_int(int64_t v, const char* what);
}  // namespace cuda_detail

namespace cuda {
struct Fp8Out;
}
namespace cuda_detail {
// The launch form of an optional Fp8Activation output (disabled when empty).
cuda::Fp8Out fp8_out(const Fp8Activation& a);
}  // namespace cuda_detail

}  // namespace hyllm
