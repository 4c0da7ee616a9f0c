#pragma once
// Checks the (canonical) tensors of a checkpoint against the Qwen3.5
// catalogue before any byte is read.
//
// Rules:
// - every catalogue tensor is present with exactly the catalogue shape;
// - plain parameters are stored as a float type (bf16, fp16, fp32), never FP8;
// - a quantizable linear weight is either a float type with no scales, or FP8
//   e4m3 with the scales of config.quant.method (block FP8: weight_scale_inv of
//   shape [ceil(N/bn), ceil(K/bk)]; ModelOpt: scalar weight_scale and
//   input_scale); an FP8 weight in a model without a quantization config is
//   an error, and so is any disagreement with the config's exclude list (a
//   linear the config calls FP8 stored in BF16, or the reverse): a config
//   that misdescribes its checkpoint is not guessed around;
// - every scale tensor belongs to an FP8 weight (orphans are errors);
//   KV-cache scales (layers.i.self_attn.{k,v}_scale, scalars) are accepted on
//   full-attention layers whenever present;
// - the MTP head (mtp.*, when config.json has mtp_num_hidden_layers) is
//   checked like the rest when the checkpoint has any mtp.* tensor and may
//   be absent as a whole; mtp.* tensors of a config without MTP layers are
//   dropped;
// - anything else is unexpected and an error (a strict rule, because a
//   silently ignored tensor is how name-mapping bugs turn into garbage
//   output), except lm_head.weight in a tied model and rotary inv_freq
//   buffers, which are ignored.
// All problems are collected and reported in one kCorruptData error that
// names the offending tensors (the first few of each kind, and the count).

#include <string>
#include <vector>

#include "model/config/model_config.h"
#include "model/loader/qwen35_catalogue.h"
#include "model/loader/weight_source.h"

namespace hyllm {

struct CheckpointCheck {
  ExpertLayout expert_layout = ExpertLayout::kFused;
  // Present in the checkpoint but not needed (see the rules above): drop them.
  std::vector<std::string> ignored;
  int64_t fp8_linears = 0;
};

// `source_name` names the checkpoint in the error message.
CheckpointCheck check_checkpoint_tensors(const std::vector<TensorInfo>& tensors, const ModelConfig& config,
                                         const std::string& source_name);

// When `t` is an FP8 scale (weight_scale_inv, weight_scale, input_scale,
// self_attn.k_scale / v_scale) whose stored bytes hold a NaN, an infinity,
// zero or a negative value, throws kCorruptData naming it and the first bad
// element: such a scale silently turns its whole tensor into garbage or NaN.
// Called where the loader reads each scale, so it costs no extra reads.
void check_scale_values(const TensorInfo& t, const void* bytes);

}  // namespace hyllm
