#pragma once
// The op vocabulary: every computation a model performs, as free functions
// taking the Backend and an argument struct of tensor views and scalars. Each
// function validates shapes, dtypes and devices (hyllm::Error kInvalidArgument
// naming the op and the field) and then dispatches to the backend's Kernels.
//
// Rules every op follows, so that a GPU backend can run them asynchronously on
// its stream and capture a whole decode step in a graph:
//  - No host read of device data: per-token and per-sequence metadata
//    (positions, slot mappings, block tables, sequence offsets, state slots)
//    are device tensors; host scalars are only sizes and hyper-parameters.
//  - Flat tokens: T tokens of S sequences are concatenated without padding;
//    sequence s owns tokens [query_start_loc[s], query_start_loc[s+1]).
//    A capture with fixed capacity may pad with sequences of zero tokens and
//    with tokens whose slot mapping is negative.
//  - Activations are 2-D row-major [T, width]; head counts and head sizes are
//    scalars of the arg struct, heads are contiguous blocks of a row.
//  - Outputs never alias inputs unless a field says "in place".
//  - Arithmetic is fp32 inside an op; a bf16 output is rounded once (round to
//    nearest even) at the end unless a field documents another rounding. This
//    is what HF transformers computes in fp32 from bf16 inputs, rounded at the
//    module boundary; each op states where it rounds in between.
//
// Index tensors are int32. Scratch memory is the backend's business.

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace hyllm {

class Backend;

// Columns [offset, offset + width) of a 2-D row-major tensor [rows, total]:
// lets an op read one part of a merged projection output (q|k|v, qkv|z, b|a)
// without a copy. The row stride is tensor.dim(1). A TensorView converts to
// the slice of all its columns.
struct ColSlice {
  TensorView tensor;
  int64_t offset = 0;
  int64_t width = 0;

  ColSlice() = default;
  ColSlice(const TensorView& t)  // NOLINT(google-explicit-constructor): whole tensor
      : tensor(t), offset(0), width(t.rank() == 2 ? t.dim(1) : 0) {}
  ColSlice(const TensorView& t, int64_t col_offset, int64_t col_width)
      : tensor(t), offset(col_offset), width(col_width) {}

  bool empty() const { return tensor.empty(); }
  int64_t rows() const { return tensor.rank() == 2 ? tensor.dim(0) : 0; }
  int64_t stride() const { return tensor.rank() == 2 ? tensor.dim(1) : 0; }
};

// ---------------------------------------------------------------------------
// Linear weights: y = x W^T, W stored [N, K] (out, in) as in nn.Linear.

enum class WeightFormat : uint8_t {
  kBf16,       // weight bf16 [N, K]
  kFp8Block,   // Qwen "fp8" method: weight e4m3 [N, K], weight_scale f32
               // [ceil(N/128), ceil(K/128)] (the checkpoint's weight_scale_inv;
               // dequantisation MULTIPLIES: W[n,k] = Wq[n,k] * s[n/128, k/128]);
               // activations quantised dynamically per token per 128 columns.
  kFp8Tensor,  // ModelOpt "FP8": weight e4m3 [N, K], weight_scale f32 [1],
               // input_scale f32 [1] (static activation scale).
};
const char* weight_format_name(WeightFormat f);

inline constexpr int64_t kFp8BlockSize = 128;
inline constexpr float kFp8E4M3Max = 448.0f;
// Floor of the dynamic activation amax so an all-zero group gets a finite scale
// (vLLM per_token_group_quant_fp8's eps).
inline constexpr float kFp8GroupAmaxFloor = 1e-10f;

struct LinearWeight {
  WeightFormat format = WeightFormat::kBf16;
  TensorView weight;        // [N, K]
  TensorView weight_scale;  // fp8 formats only (see WeightFormat)
  TensorView input_scale;   // kFp8Tensor only: f32 [1]

  static LinearWeight bf16(const TensorView& w) { return {WeightFormat::kBf16, w, {}, {}}; }
  static LinearWeight fp8_block(const TensorView& w, const TensorView& scale_inv) {
    return {WeightFormat::kFp8Block, w, scale_inv, {}};
  }
  static LinearWeight fp8_tensor(const TensorView& w, const TensorView& weight_scale,
                                 const TensorView& input_scale) {
    return {WeightFormat::kFp8Tensor, w, weight_scale, input_scale};
  }

  bool empty() const { return weight.empty(); }
  int64_t out_features() const { return weight.rank() >= 2 ? weight.dim(-2) : 0; }
  int64_t in_features() const { return weight.rank() >= 2 ? weight.dim(-1) : 0; }
};

// ---------------------------------------------------------------------------
// Row room of activations. cuBLASLt's block-scaled FP8 GEMM takes only row
// counts that are multiples of 4, and a linear whose rows are not would
// otherwise split its rows over two kernels that each read every weight.
// Invariant: the activation buffers the model takes from its arena
// (model/layers: Scratch::take, take_input, ActivationBuffers) are backed for
// padded_rows(rows) rows, and the views say so (Fp8Activation::rows_padded,
// LinearArgs::out_rows_padded). An op may read those extra rows (their
// contents are unspecified) and write them (nobody reads what it leaves
// there). A view without the flag (a slice, a test's tensor) is backed for
// its rows only.
inline constexpr int64_t kActivationRowPad = 4;
constexpr int64_t padded_rows(int64_t rows) {
  return (rows + kActivationRowPad - 1) / kActivationRowPad * kActivationRowPad;
}

// ---------------------------------------------------------------------------
// FP8 activations. An FP8 linear reads its input as e4m3 codes with scales.
// The op that produces an activation (rms_norm, gated_rms_norm, swiglu, or
// quantize_fp8 after an op that cannot) quantises it once, and every FP8
// linear reading that activation consumes the same codes.

enum class ActQuantMode : uint8_t {
  kNone,
  // Dynamic, one scale per token per 128 columns (the block-FP8 weights'
  // activation scheme): for row t and column group j,
  //   s[j, t] = max(amax_{k in group j} |x[t, k]|, 1e-10) / 448   (fp32),
  //   q[t, k] = e4m3(clamp(x[t, k] / s[k / 128, t], -448, 448)).
  kGroup128,
  // One given scale for the whole tensor (per-tensor FP8 weights' static
  // input_scale): q[t, k] = e4m3(clamp(x[t, k] / s, -448, 448)).
  kStatic,
};
const char* act_quant_mode_name(ActQuantMode m);

// e4m3 is round to nearest even, and x is the bf16 value the producer writes
// (or would write) as its bf16 output: quantising that rounding keeps fused
// and unfused paths bit-identical.
struct Fp8Activation {
  ActQuantMode mode = ActQuantMode::kNone;
  TensorView q;      // [T, K] e4m3
  // kGroup128: f32 [ceil(K/128), T], group-major (T fastest: cuBLASLt's
  // VEC128 layout), written by the producer; kStatic: f32 [1], read.
  TensorView scale;
  // q is backed for padded_rows(rows()) rows (see kActivationRowPad), none
  // of them another tensor's; the scales keep their pitch of rows() either
  // way.
  bool rows_padded = false;

  bool empty() const { return mode == ActQuantMode::kNone; }
  int64_t rows() const { return q.rank() == 2 ? q.dim(0) : 0; }
  int64_t cols() const { return q.rank() == 2 ? q.dim(1) : 0; }
};

// The mode an FP8 weight format reads its input in (kNone for bf16).
ActQuantMode act_quant_mode_for(WeightFormat f);

// out = quantised x (see ActQuantMode), for activations whose producer
// cannot write FP8 itself.
struct QuantizeFp8Args {
  ColSlice x;         // [T, K] bf16
  Fp8Activation out;  // [T, K]
};
void quantize_fp8(Backend& be, const QuantizeFp8Args& a);

// ---------------------------------------------------------------------------
// Linear.

// out[m, n] = sum_k x[m, k] * W[n, k], accumulated in fp32 (exactly, for fp8).
//
// kBf16: bf16 x bf16 products, fp32 accumulation (order unspecified).
// kFp8Block: with xq = the kGroup128 quantisation of x (scales sx[j, m]):
//   P[m,n,j] = float( exact sum over block j of xq * Wq )   (one rounding),
//   acc = 0; for j ascending: acc += (P[m,n,j] * sx[j,m]) * sw[n/128, j]  (fp32).
// kFp8Tensor: with xq = the kStatic quantisation of x by scale sx:
//   acc = float( exact sum_k xq * Wq ) * (sx * weight_scale)  (fp32).
// "exact sum" is the sum an exact FP8 tensor-core GEMM accumulates; K must be
// at most 65536 for kFp8Tensor (the CPU reference is exact below that).
// xq is given already quantised (x may then be empty), or the op quantises x
// itself (kStatic with the weight's input_scale): the slow path that
// quantise-once avoids, counted in Backend::counters().
// out: bf16 (rounded once) or f32 (unrounded, e.g. for logits).
struct LinearArgs {
  TensorView x;  // [M, K] bf16 (may be empty when xq is given)
  LinearWeight w;
  TensorView out;    // [M, N] bf16 or f32
  Fp8Activation xq;  // optional, fp8 weights only: mode act_quant_mode_for(w.format)
  // out is backed for padded_rows(M) rows (see kActivationRowPad), none of
  // them another tensor's.
  bool out_rows_padded = false;
};
void linear(Backend& be, const LinearArgs& a);

// ---------------------------------------------------------------------------
// Embedding and row movement.

// out[t, :] = table[ids[t], :] (no scaling). ids must lie in [0, V); the CPU
// backend reports kInvalidArgument otherwise, a GPU backend writes zeros.
//
// Vocabulary-parallel (part_of_vocab): the table holds rows
// [vocab_start, vocab_start + V) of the whole vocabulary, and
// out[t, :] = table[ids[t] - vocab_start, :] when ids[t] lies in that range,
// zeros otherwise (no error): summed over the ranks, every row is the whole
// table's row. vocab_start is >= 0, and 0 without part_of_vocab.
struct EmbeddingArgs {
  TensorView ids;    // [T] i32
  TensorView table;  // [V, H] bf16
  TensorView out;    // [T, H] bf16
  bool part_of_vocab = false;
  int64_t vocab_start = 0;  // with part_of_vocab
};
void embedding(Backend& be, const EmbeddingArgs& a);

// out[r, :] = src[indices[r], :]; any dtype (the same for src and out). Used to
// pick the rows that are sampled before the final norm and the logits.
struct GatherRowsArgs {
  TensorView src;      // [T, W]
  TensorView indices;  // [R] i32, each in [0, T)
  TensorView out;      // [R, W]
};
void gather_rows(Backend& be, const GatherRowsArgs& a);

// ---------------------------------------------------------------------------
// Collectives (tensor parallelism): the backend's communicator
// (backend/communicator.h) exchanges tensors with the other ranks. Every rank
// calls the same op with the same shapes; a backend without a communicator
// reports kInvalidArgument.

// out = the sum over all ranks of their x, in fp32, rounded once to out's
// dtype: the reduction after a row-parallel projection. x is bf16 or f32
// [T, W]; out is bf16 or f32 [T, W] and may be x itself (in place).
// The order of the fp32 additions is the implementation's (the CPU adds in
// rank order, NCCL in its ring's), so results may differ from one unsplit
// sum in the last fp32 bit.
struct AllReduceArgs {
  TensorView x;
  TensorView out;
};
void all_reduce(Backend& be, const AllReduceArgs& a);

// Rank r's x [R, w] lands at columns [r * w, r * w + w) of out [R, N], the
// columns past N cut (the last ranks may hold padding): the logits of a
// vocabulary-parallel lm_head. N <= size * w; x and out f32 or bf16, the same
// dtype; out must not alias x.
struct AllGatherColumnsArgs {
  TensorView x;
  TensorView out;
};
void all_gather_columns(Backend& be, const AllGatherColumnsArgs& a);

// ---------------------------------------------------------------------------
// Generated data.

// Fills every element i of dst (contiguous) with
//   dtype( offset + scale * base(rng::mix(stream + i)) )
// where base is rng::normal (kNormal) or rng::uniform01 (kUniform) of
// util/counter_rng.h, computed in fp32 and rounded once (tensor/dtype.h's
// conversions: e4m3 codes do not saturate, |x| >= 480 gives NaN): dummy
// weights made where they live, with no host copy, the same bytes on every
// backend.
enum class RandomDistribution : uint8_t { kNormal, kUniform };
struct FillRandomArgs {
  TensorView dst;  // any shape, bf16, f32 or e4m3
  uint64_t stream = 0;
  RandomDistribution distribution = RandomDistribution::kNormal;
  float offset = 0.0f;
  float scale = 1.0f;
};
void fill_random(Backend& be, const FillRandomArgs& a);

// ---------------------------------------------------------------------------
// Online weight quantisation (--quantization fp8 on a BF16 checkpoint).

// Per-tensor FP8 quantisation of one weight, vLLM's online fp8:
//   s = max(amax_i |w[i]|, 1e-10) / 448          (fp32; NaN elements skipped)
//   out[i] = e4m3( clamp(w[i] / s, -448, 448) )  (IEEE division, round to
//                                                  nearest even; NaN stays NaN)
//   scale[j] = s for every element j of scale.
// scale may have any shape: the [ceil(N/128), ceil(K/128)] grid of a
// kFp8Block LinearWeight then holds the tensor's one scale in every block,
// and the block-FP8 linear quantises activations dynamically.
struct QuantizeWeightFp8Args {
  TensorView w;      // bf16, contiguous, any shape
  TensorView out;    // e4m3, as many elements as w
  TensorView scale;  // f32, at least one element
};
void quantize_weight_fp8(Backend& be, const QuantizeWeightFp8Args& a);

// ---------------------------------------------------------------------------
// Norms.

// RMSNorm over the last dimension, optionally fused with the residual add.
//   s = residual_in present ? bf16(float(x) + float(residual_in)) : x
//   residual_out (if present) = s                 (bf16; the HF residual stream)
//   out = bf16( s * rsqrt(mean(s^2) + eps) * (plus_one ? 1 + w : w) )  (fp32)
// The sum is rounded to bf16 before it is normalised, as HF's bf16 residual
// add and vLLM's fused_add_rms_norm do. residual_in and residual_out may be the
// same tensor (in place); out must not alias either. out_fp8 (optional) gets
// the FP8 quantisation of out's values; out may then be empty.
struct RmsNormArgs {
  TensorView x;             // [T, H] bf16
  TensorView weight;        // [H] bf16 or f32
  TensorView out;           // [T, H] bf16 (optional with out_fp8)
  TensorView residual_in;   // optional [T, H] bf16
  TensorView residual_out;  // optional [T, H] bf16
  float eps = 1e-6f;
  bool plus_one = true;  // Qwen3.5 RMSNorm1p: scale by (1 + w)
  Fp8Activation out_fp8;    // optional [T, H]
};
void rms_norm(Backend& be, const RmsNormArgs& a);

// The GDN output norm, per value head of width head_dim (plain w, gate SiLU):
//   n = bf16( x * rsqrt(mean(x^2) + eps) )      (HF rounds the normalised x)
//   out = bf16( n * w * silu(z) )               (fp32, z and w read as fp32)
// out_fp8 (optional) gets the FP8 quantisation of out; out may then be empty.
struct GatedRmsNormArgs {
  TensorView x;       // [T, num_heads * head_dim] bf16 (the delta-rule output)
  ColSlice z;         // [T, num_heads * head_dim] bf16 (in_proj_z output)
  TensorView weight;  // [head_dim] bf16 or f32
  TensorView out;     // [T, num_heads * head_dim] bf16 (optional with out_fp8)
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  float eps = 1e-6f;
  Fp8Activation out_fp8;  // optional [T, num_heads * head_dim]
};
void gated_rms_norm(Backend& be, const GatedRmsNormArgs& a);

// ---------------------------------------------------------------------------
// Gated full attention.

// Paged KV cache of one attention layer, vLLM's flash layout:
// k, v: [num_blocks, block_size, num_kv_heads, head_dim], both bf16 or both
// e4m3 (float8_e4m3fn); token slot s = block * block_size + offset.
//
// An e4m3 cache holds codes with one scale per tensor (vLLM's fp8 KV cache):
// the cached value of an element x (the bf16 value a bf16 cache would hold)
// is float(code) * scale with code = e4m3(clamp(x / scale, -448, 448))
// (fp32 division, round to nearest even, saturating; NaN stays NaN). The
// scales are ignored for a bf16 cache.
struct KvCacheView {
  TensorView k;
  TensorView v;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  DType dtype() const { return k.dtype(); }
  int64_t num_blocks() const { return k.rank() == 4 ? k.dim(0) : 0; }
  int64_t block_size() const { return k.rank() == 4 ? k.dim(1) : 0; }
};

// Everything between the q/k/v projections and the attention itself:
//  1. per head h the q_proj row holds [q_h (head_dim) | gate_h (head_dim)];
//     gate_out[t, h*D:(h+1)*D] = gate_h (copied, bf16);
//  2. q_h and every k head: RMSNorm1p over head_dim with q_norm / k_norm
//     (fp32, eps), rounded to bf16;
//  3. NeoX RoPE on dims [0, rotary_dim) of each normed q/k head, pairs
//     (i, i + rotary_dim/2), angle = float(positions[t]) * inv_freq_i with
//     inv_freq_i = 1 / rope_theta^(2i / rotary_dim) (fp32); dims
//     [rotary_dim, head_dim) pass through unchanged; rounded to bf16 into q_out;
//  4. the rotated k and the raw v are written to the cache at
//     slot_mapping[t] (as e4m3 codes of k / k_scale and v / v_scale for an
//     e4m3 cache); tokens with a negative slot are not written.
// Text-only mRoPE is plain positions, so one position per token suffices.
struct AttentionPrepArgs {
  ColSlice q_gate;         // [T, num_q_heads * 2 * head_dim] bf16
  ColSlice k;              // [T, num_kv_heads * head_dim] bf16
  ColSlice v;              // [T, num_kv_heads * head_dim] bf16
  TensorView q_norm;       // [head_dim] bf16 or f32, (1 + w) form
  TensorView k_norm;       // [head_dim] bf16 or f32, (1 + w) form
  TensorView positions;    // [T] i32
  TensorView slot_mapping; // [T] i32, < num_blocks * block_size
  TensorView q_out;        // [T, num_q_heads * head_dim] bf16
  TensorView gate_out;     // [T, num_q_heads * head_dim] bf16
  KvCacheView cache;
  int64_t num_q_heads = 0;
  int64_t num_kv_heads = 0;  // divides num_q_heads
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;    // even, <= head_dim
  float rope_theta = 10000.0f;
  float eps = 1e-6f;
};
void attention_prep(Backend& be, const AttentionPrepArgs& a);

// Causal GQA attention of the new tokens of S sequences over their cached
// context (which already holds the new tokens' k/v: run attention_prep first).
// Sequence s has q_len = query_start_loc[s+1] - query_start_loc[s] new tokens
// and seq_lens[s] >= q_len tokens in all; its j-th new token sits at position
// seq_lens[s] - q_len + j and attends to positions [0, that position]. Token
// position p lives at slot block_tables[s][p / block_size] * block_size +
// p % block_size. Query head h reads kv head h / (num_q_heads / num_kv_heads).
//   scores = (q . k) * scale (fp32); p = softmax(scores) (fp32);
//   o = bf16( sum p * v )       (the bf16 attention output, as HF's)
//   out = gate present ? bf16( o * sigmoid(gate) ) : o     (fp32 product)
// With an e4m3 cache the scales are folded out of the sums, which keeps the
// codes exact on bf16 tensor cores:
//   scores = (q . float(kcode)) * (k_scale * scale);
//   o = bf16( v_scale * sum p * float(vcode) ).
struct PagedAttentionArgs {
  TensorView q;                // [T, num_q_heads * head_dim] bf16
  KvCacheView cache;
  TensorView block_tables;     // [S, max_blocks_per_seq] i32
  TensorView query_start_loc;  // [S + 1] i32, non-decreasing, [0] = 0, [S] = T
  TensorView seq_lens;         // [S] i32
  TensorView gate;             // optional [T, num_q_heads * head_dim] bf16
  TensorView out;              // [T, num_q_heads * head_dim] bf16
  int64_t num_q_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 0.0f;          // 0 means 1/sqrt(head_dim)
  // Host-side upper bounds for launch sizing; 0 = unknown. Not validated
  // against the device data.
  int64_t max_query_len = 0;
  int64_t max_seq_len = 0;
};
void paged_attention(Backend& be, const PagedAttentionArgs& a);

// ---------------------------------------------------------------------------
// Gated DeltaNet. State lives in slots; sequence s uses slot state_indices[s].
// A sequence whose has_initial_state[s] is 0 starts from zeros (conv and
// recurrent state), so a slot's stale content is never read.
//
// Saving an intermediate state (prefix caching): when save_slots is given,
// every sequence s with save_slots[s] >= 0 also writes its state after its
// first save_lens[s] tokens of this call (1 <= save_lens[s] <= n) to slot
// save_slots[s], in the layout of its live slot, while the call goes on to
// the end of the sequence as usual. The save slot must be a slot that no
// sequence of the call reads or writes. This is how the state at a block
// boundary inside a prefill chunk is kept without ending the step there.
struct StateSaveArgs {
  TensorView save_slots;  // optional [S] i32, < 0: no save
  TensorView save_lens;   // [S] i32 when save_slots is given
  bool empty() const { return save_slots.empty(); }
};

// Causal depthwise conv1d over C channels, kernel width K, with state:
//   out[t, c] = bf16( silu( sum_{j<K} w[c, j] * x_{t-K+1+j}[c] ) )   (fp32)
// where tap K-1 is the current token and earlier inputs of the same sequence
// come from this call, then from conv_state (or zeros when the sequence
// starts). conv_state[slot] holds the last K-1 raw (pre-conv) input rows of the
// sequence, oldest first, and is updated in place (bf16, exact copies).
// spec_states (optional, speculative decoding): for every sequence of n <=
// K_spec + 1 tokens (a verify chunk), the conv state after each of its first
// n - 1 tokens is also written, to spec_states[slot][j] (the state after the
// last token goes to conv_state as always), so that select_state can roll
// back; longer sequences (prefill chunks in the same step) write none.
struct GdnConvArgs {
  ColSlice x;                    // [T, C] bf16 (the q|k|v part of in_proj_qkv)
  TensorView weight;             // [C, K] or [C, 1, K] bf16
  TensorView conv_state;         // [num_slots, K - 1, C] bf16, in place
  TensorView query_start_loc;    // [S + 1] i32
  TensorView state_indices;      // [S] i32
  TensorView has_initial_state;  // [S] i32 (0 or 1)
  TensorView out;                // [T, C] bf16
  TensorView spec_states;        // optional [num_slots, K_spec, K - 1, C] bf16
  StateSaveArgs save;            // optional: the window after save_lens[s] tokens
  int64_t max_query_len = 0;     // host hint, the most tokens of any sequence; 0 = unknown
};
void gdn_conv(Backend& be, const GdnConvArgs& a);

enum class DeltaRuleAlgorithm : uint8_t {
  kChunked,    // WY form, chunks of 64 tokens (prefill); any q_len
  kRecurrent,  // token by token (decode); any q_len
};

// The gated delta rule with in-kernel L2 norm and gating, per sequence.
// qkv row = [q heads (num_k_heads * k_dim) | k heads (same) | v heads
// (num_v_heads * v_dim)], each head contiguous (the conv output). In fp32:
//   q^ = q * rsqrt(sum q^2 + 1e-6) / sqrt(k_dim);  k^ = k * rsqrt(sum k^2 + 1e-6)
//   beta = sigmoid(b);  g = -exp(A_log) * softplus(a + dt_bias)
//   (softplus(x) = x for x > 20); value head j uses k/q head j / (Hv / Hk).
// Per value head, state S (k_dim x v_dim, fp32):
//   S = exp(g) S;  u = beta (v - S^T k^);  S = S + k^ u^T;  o = S^T q^.
// out = bf16(o). The chunked form computes the same recurrence in chunks of
// 64 tokens (QWEN35.md 4.2) for sequences of at least 64 tokens, with the
// chunk products on tensor cores in TF32 where the backend has them (state
// kept and accumulated in fp32); a backend may run the recurrence instead
// (the CPU backend always does, for batch invariance).
//
// State layout: state[slot][head][v][k] (v-major, k contiguous; vLLM's
// current layout): a decode kernel owns rows of v and streams k contiguously.
// Read at the start of each sequence (unless it starts), written at its end.
// spec_states (optional, speculative decoding): for a sequence of n <=
// K_spec + 1 tokens, the state after each of its first n - 1 tokens is also
// written, to spec_states[slot][j], in the same layout (as for gdn_conv).
struct GatedDeltaRuleArgs {
  TensorView qkv;                // [T, 2 * Hk * Dk + Hv * Dv] bf16
  ColSlice a;                    // [T, Hv] bf16 (in_proj_a output)
  ColSlice b;                    // [T, Hv] bf16 (in_proj_b output)
  TensorView A_log;              // [Hv] f32 or bf16
  TensorView dt_bias;            // [Hv] f32 or bf16
  TensorView state;              // [num_slots, Hv, Dv, Dk] f32, in place
  TensorView query_start_loc;    // [S + 1] i32
  TensorView state_indices;      // [S] i32
  TensorView has_initial_state;  // [S] i32 (0 or 1)
  TensorView out;                // [T, Hv * Dv] bf16
  int64_t num_k_heads = 0;       // Hk
  int64_t num_v_heads = 0;       // Hv, a multiple of Hk
  int64_t k_dim = 0;             // Dk
  int64_t v_dim = 0;             // Dv
  DeltaRuleAlgorithm algorithm = DeltaRuleAlgorithm::kChunked;
  int64_t max_query_len = 0;     // host hint, 0 = unknown
  TensorView spec_states;        // optional [num_slots, K_spec, Hv, Dv, Dk] f32
  // Optional: the state after save_lens[s] tokens. The chunked form then
  // starts a new chunk there (the sequence runs as two segments, the second
  // from the first's state), so the saved state is the one a call over the
  // first segment alone would leave.
  StateSaveArgs save;
};
void gated_delta_rule(Backend& be, const GatedDeltaRuleArgs& a);

// Speculative rollback of per-slot state (GDN conv or recurrent state, any
// dtype): for every s with keep[s] >= 0,
//   live[state_indices[s]] = saved[state_indices[s]][keep[s]]
// (an exact copy; keep[s] < K_spec); sequences with keep[s] < 0 keep their
// live state. `saved` is what gdn_conv / gated_delta_rule wrote as
// spec_states: keep[s] = j restores the state after the sequence's token j.
struct SelectStateArgs {
  TensorView live;           // [num_slots, ...]
  TensorView saved;          // [num_slots, K_spec, ...] (the same trailing shape and dtype)
  TensorView state_indices;  // [S] i32
  TensorView keep;           // [S] i32
};
void select_state(Backend& be, const SelectStateArgs& a);

// ---------------------------------------------------------------------------
// MLP and MoE.

// out = bf16( silu(gate) * up ) in fp32, from a fused [gate | up] projection.
// out_fp8 (optional) gets the FP8 quantisation of out; out may then be empty.
struct SwigluArgs {
  ColSlice x;             // [T, 2 * I] bf16: columns [0, I) gate, [I, 2I) up
  TensorView out;         // [T, I] bf16 (optional with out_fp8)
  Fp8Activation out_fp8;  // optional [T, I]
};
void swiglu(Backend& be, const SwigluArgs& a);

// Router: p = softmax(logits) over all E experts (fp32); the top_k largest p
// (ties: lower expert id first), in descending order, renormalised to sum 1.
struct MoeRouteArgs {
  TensorView logits;        // [T, E] bf16 or f32 (router linear output)
  TensorView topk_ids;      // [T, top_k] i32
  TensorView topk_weights;  // [T, top_k] f32
  int64_t top_k = 0;
};
void moe_route(Backend& be, const MoeRouteArgs& a);

// Expert weights of one MoE layer, stacked along a leading expert dimension
// (the layout of the BF16 checkpoints; per-expert checkpoints are merged into
// it at load): gate_up.weight [E, 2I, H] with each expert's rows
// [gate (I) | up (I)], down.weight [E, H, I]. Scales gain the leading E too:
// kFp8Block [E, ceil(2I/128), ceil(H/128)] and [E, ceil(H/128), ceil(I/128)]
// (I a multiple of 128, so that no scale block mixes gate and up rows);
// kFp8Tensor weight_scale and input_scale [E] each.
struct MoeExpertWeights {
  LinearWeight gate_up;
  LinearWeight down;

  bool empty() const { return gate_up.empty(); }
  int64_t num_experts() const { return gate_up.weight.rank() == 3 ? gate_up.weight.dim(0) : 0; }
  int64_t intermediate() const { return down.weight.rank() == 3 ? down.weight.dim(2) : 0; }
};

// The shared expert: a SwiGLU MLP that every token runs, gate_up [2Is, H]
// (rows [gate | up]) and down [H, Is] in one format, scaled by the sigmoid of
// the shared_expert_gate logit when gate is given (by 1 otherwise).
struct MoeSharedExpert {
  LinearWeight gate_up;
  LinearWeight down;
  TensorView gate;  // optional [1, H] bf16

  bool empty() const { return gate_up.empty(); }
  int64_t intermediate() const { return down.in_features(); }
};

// One whole MoE block (router, routed experts, shared expert, combine):
//   logits[t, e] = bf16( x[t] . router[e] )                 (fp32 dot)
//   (ids, w)     = moe_route(logits, top_k)
//   F(v)         = linear(down, swiglu(linear(gate_up, v)))  of one expert,
//                  each op rounding as documented there (bf16 outputs)
//   g[t]         = sigmoid( bf16( x[t] . shared.gate ) )    (1 without a gate)
//   out[t] = bf16( r[t] + g[t] * F_shared(x[t]) ),  r[t] = sum over the top_k
//            choices in ascending expert id of w[t,i] * F_{ids[t,i]}(x[t])
//   (fp32; each product rounded, then added in that order, then the shared term).
// FP8 projections read their input quantised as linear says: block-FP8
// experts (and a block-FP8 shared expert) read xq, the kGroup128
// quantisation of x made once by x's producer (the router and the gate read
// bf16 x); without xq the op quantises x itself, the slow path that
// Backend::counters() counts. Each expert's SwiGLU output is quantised the
// same way (counted as one producer quantisation) before an FP8 down
// projection. Per-tensor FP8 experts quantise x with their own input scales.
// The routing is written to topk_ids / topk_weights when given, and
// expert_load[e] grows by the number of tokens routed to expert e.
struct MoeArgs {
  TensorView x;       // [T, H] bf16
  Fp8Activation xq;   // optional [T, H] kGroup128, for block-FP8 experts
  TensorView router;  // [E, H] bf16
  int64_t top_k = 0;
  MoeExpertWeights experts;
  MoeSharedExpert shared;   // optional
  TensorView out;           // [T, H] bf16
  TensorView topk_ids;      // optional [T, top_k] i32
  TensorView topk_weights;  // optional [T, top_k] f32
  TensorView expert_load;   // optional [E] i32, accumulated
};
void moe(Backend& be, const MoeArgs& a);

}  // namespace hyllm
