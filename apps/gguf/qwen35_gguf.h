#pragma once
// hyllm's Qwen3.5 weights in llama.cpp's `qwen35` / `qwen35moe` GGUF layout,
// as the pinned llama.cpp's converter (convert_hf_to_gguf.py, conversion/
// qwen.py: Qwen3_5TextModel, Qwen3_5MoeTextModel) writes a Hugging Face
// checkpoint and as its model code (src/models/qwen35*.cpp) reads it:
//
//   embed_tokens            -> token_embd            lm_head -> output (absent when tied)
//   norm (+1)               -> output_norm           layers.i.* -> blk.i.*
//   input_layernorm (+1)    -> attn_norm             post_attention_layernorm (+1) -> post_attention_norm
//   self_attn.{q,k,v,o}_proj -> attn_{q,k,v,output}  (q keeps Qwen's per-head [query | gate] rows)
//   self_attn.{q,k}_norm (+1) -> attn_{q,k}_norm
//   linear_attn.in_proj_qkv -> attn_qkv   in_proj_z -> attn_gate   in_proj_b -> ssm_beta   in_proj_a -> ssm_alpha
//   linear_attn.conv1d [C,1,K] -> ssm_conv1d [C,K]   A_log -> ssm_a = -exp(A_log)   dt_bias -> ssm_dt.bias
//   linear_attn.norm (no +1) -> ssm_norm     out_proj -> ssm_out
//   mlp.{gate,up,down}_proj -> ffn_{gate,up,down}
//   mlp.gate -> ffn_gate_inp   experts gate_up_proj [E,2I,H] -> ffn_gate_exps + ffn_up_exps, down -> ffn_down_exps
//   shared_expert.{gate,up,down}_proj -> ffn_{gate,up,down}_shexp   shared_expert_gate [1,H] -> ffn_gate_inp_shexp [H]
//
// When the GDN layers have more value heads than key heads, every tensor
// indexed by value head is reordered from Qwen's grouped order (the r value
// heads of key head 0, then of key head 1, ...) to llama.cpp's tiled order
// (value head j of every key head, for j = 0..r-1), so that ggml's broadcast
// pairs each value head with its key head.
//
// Element types follow the converter's output for its --outtype: norms, 1-D
// tensors, ssm_a, ssm_dt, ssm_conv1d and the routers in F32; every other
// matrix (embeddings, lm_head and experts included) in BF16 (a BF16
// checkpoint's bytes unchanged) or, with Q8_0, in ggml's Q8_0 blocks made
// from the values after the transforms above (F16 where a row is not whole
// blocks of 32, the converter's fallback). Layouts need no
// transposition: a row-major [rows, cols] tensor is ggml's ne = {cols, rows}.

#include <string>

#include "gguf/gguf_writer.h"
#include "model/config/model_config.h"
#include "model/loader/weight_source.h"

namespace hyllm::gguf {

// "qwen35" or "qwen35moe". Configurations llama.cpp's loader cannot express
// (FP8 weights, key and value head sizes that differ, attention layers off
// the full_attention_interval pattern, MoE without normalised top-k, no
// output gate, rope scaling) are kUnsupported naming the reason.
std::string qwen35_gguf_arch(const ModelConfig& config);

// The matrices' element type (llama.cpp converter's --outtype).
enum class GgufOutType { kBf16, kQ8_0 };
// "bf16" or "q8_0"; anything else is kInvalidArgument.
GgufOutType parse_gguf_outtype(const std::string& name);

// Adds the model's metadata and every tensor, read from `weights` while the
// file is written (the source must outlive out.write()).
void add_qwen35_model(const ModelConfig& config, const WeightSource& weights, const std::string& name,
                      GgufWriter& out, GgufOutType outtype = GgufOutType::kBf16);

}  // namespace hyllm::gguf
