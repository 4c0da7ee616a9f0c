#pragma once
// Tensor parallelism at load time: which part of every checkpoint tensor one
// rank holds, and the config that rank's model is built from.
//
// A rank's model is an ordinary Qwen3.5 model with fewer heads and narrower
// MLPs: tensor_parallel_config() divides the head counts and intermediate
// sizes, and shard_weights() presents each tensor of the checkpoint cut to
// match, under its canonical name. The layers then load and run unchanged;
// the row-parallel projections' partial sums are reduced by the layers
// (model/layers/tensor_parallel.h). What is split, along which dimension:
//
//   column-parallel (dim 0, the output rows): q_proj (whole heads, [q | gate]
//     rows per head), k_proj / v_proj (KV heads; each KV head is held by
//     size / num_kv_heads ranks when there are fewer KV heads than ranks),
//     in_proj_qkv and conv1d (the q, k and v segments split by key or value
//     heads; GDN key heads fewer than the ranks are replicated the same way),
//     in_proj_z / b / a, A_log, dt_bias, gate_proj / up_proj
//     (dense, shared expert, per expert), the fused experts' gate_up_proj
//     (dim 1, gate and up halves each split);
//   row-parallel (the input columns): o_proj, out_proj, down_proj (dim 1; the
//     fused experts' down_proj dim 2);
//   vocabulary-parallel (dim 0): embed_tokens and lm_head, ceil(V / size)
//     rows per rank, the last rank's padded with zero rows;
//   replicated: norms, q_norm / k_norm, the GDN norm, the router, the shared
//     expert gate, per-tensor FP8 scales, KV scales.
// A block-FP8 scale (weight_scale_inv) is cut with its weight, in 128-row /
// 128-column blocks: every piece of a quantized weight must then be a
// multiple of 128 along the split dimension, else kInvalidArgument naming
// the tensor (vLLM has the same constraint).

#include <memory>
#include <string>
#include <vector>

#include "model/config/model_config.h"
#include "model/loader/weight_source.h"

namespace hyllm {

struct TensorParallel {
  int rank = 0;
  int size = 1;
};

// How one tensor is cut for one rank: along dimension `dim` its extent is a
// sequence of segments (q, k and v of in_proj_qkv; gate and up; or the whole
// extent); each segment is cut into `parts` equal pieces and the rank takes
// piece `piece` of every segment, in segment order. A segment of heads that
// are fewer than the ranks has parts < size: several ranks take the same
// piece (replicated heads). padded_rows > 0 (vocabulary-parallel, one
// segment) takes that many rows from piece * padded_rows on, zero rows past
// the extent. No segments: the whole tensor (replicated).
struct ShardRule {
  struct Segment {
    int64_t extent = 0;
    int64_t parts = 1;
    int64_t piece = 0;
  };
  int dim = 0;
  std::vector<Segment> segments;
  int64_t padded_rows = 0;

  bool replicated() const { return segments.empty(); }
  // The rank's extent along dim.
  int64_t local_extent() const;
};

// The rule for tensor `name` of the full checkpoint `full` (scales follow
// their weight). Throws kInvalidArgument when the cut does not divide.
ShardRule tensor_parallel_rule(const WeightSource& full, const ModelConfig& config, const std::string& name,
                               TensorParallel tp);

// The config of one rank's model: head counts and intermediate sizes divided
// by tp.size (KV heads and GDN key heads at least 1: replicated when fewer). kInvalidArgument, naming the field, when
// tp.size does not divide one of them.
ModelConfig tensor_parallel_config(const ModelConfig& config, TensorParallel tp);

// The rows [vocab_start, vocab_start + rows) of the vocabulary a rank holds
// of embed_tokens and lm_head (rows includes the last rank's padding).
struct VocabShard {
  int64_t vocab_start = 0;
  int64_t rows = 0;
};
VocabShard vocab_shard(int64_t vocab_size, TensorParallel tp);

// The rank's view of `full` (which must outlive it): every tensor of `full`
// under the same name, cut by tensor_parallel_rule. Reads copy the rank's
// part; a part that is one contiguous range of a mapped tensor is mapped
// without a copy. Generated (dummy) tensors stay generated: a split one with
// a stream of its own per rank, so only replicated tensors agree with
// another rank's or with the unsplit model's.
std::unique_ptr<WeightSource> shard_weights(const WeightSource& full, const ModelConfig& config, TensorParallel tp);

}  // namespace hyllm
