#pragma once
// Qwen3.5's multi-token-prediction (MTP) head, the draft model of speculative
// decoding. For the token at position p it pairs the target model's hidden
// state h_p (after the final norm, as vLLM's model forward returns it) with
// the embedding of token p+1 and predicts token p+2:
//   x   = fc( [RMSNorm1p_emb(embed(t_{p+1})) | RMSNorm1p_hid(h_p)] )   [2H] -> [H], embedding first
//   x   = one full-attention decoder layer (its own paged KV cache, RoPE at p)
//   out = mtp.norm(x)                                                  (RMSNorm1p, residual added)
//   logits = out @ lm_head^T                                            (shared with the model)
// Drafting the token after that feeds `out` back in as h (at position p + 1).
// The embedding table and lm_head are the model's (mtp_use_dedicated_embeddings false).

#include <cstdint>
#include <string>
#include <variant>

#include "model/config/model_config.h"
#include "model/layers/attention.h"
#include "model/layers/mlp.h"
#include "model/layers/moe.h"
#include "model/layers/params.h"
#include "model/layers/scratch.h"
#include "model/step_context.h"

namespace hyllm {

class MtpHead {
 public:
  // Whether the weights hold an MTP head (mtp.fc.weight and the rest).
  static bool present(const WeightLoader& w) { return w.contains("mtp.fc.weight"); }
  // Loads mtp.* (layer 0; a checkpoint with more MTP layers uses the first
  // for every draft position, as vLLM does with spec_step_idx % layers == 0).
  // max_tokens bounds forward()'s T.
  static MtpHead load(WeightLoader& w, const ModelConfig& cfg, int64_t max_tokens);

  // One pass over ctx's T tokens: token_ids[t] is t_{p+1} and hidden[t] is
  // h_p for the token's position p = ctx.positions[t]; writes out [T, H] bf16.
  // The attention layer reads and writes `cache` through ctx's slot mapping
  // and block tables, like the model's attention layers.
  void forward(Backend& be, Scratch& s, const VocabEmbedding& embed, const StepContext& ctx,
               const TensorView& hidden, const KvCacheView& cache, const TensorView& out) const;
  size_t scratch_bytes(int64_t tokens) const;

  const GatedAttention& attention() const { return attention_; }

 private:
  RmsNorm norm_embedding_, norm_hidden_, input_norm_, post_norm_, final_norm_;
  Linear fc_;
  GatedAttention attention_;
  std::variant<Mlp, MoeBlock> ffn_;
  InputNeeds attention_needs_, ffn_needs_;
  int64_t hidden_ = 0, max_tokens_ = 0;
  // The rows of a [2 * max_tokens, H] stage whose interleaving is the
  // [T, 2H] concatenation: 0, M, 1, M + 1, ... (M = max_tokens).
  DeviceBuffer concat_rows_;
};

}  // namespace hyllm
