#include "model/layers/mtp_head.h"

#include <vector>

namespace hyllm {

MtpHead MtpHead::load(WeightLoader& w, const ModelConfig& cfg, int64_t max_tokens) {
  MtpHead m;
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  m.hidden_ = cfg.hidden_size;
  m.max_tokens_ = max_tokens;
  m.norm_embedding_ = RmsNorm::load(w, "mtp.pre_fc_norm_embedding.weight", eps);
  m.norm_hidden_ = RmsNorm::load(w, "mtp.pre_fc_norm_hidden.weight", eps);
  m.fc_ = Linear::load(w, {"mtp.fc"});
  const std::string p = "mtp.layers.0";
  m.input_norm_ = RmsNorm::load(w, p + ".input_layernorm.weight", eps);
  m.post_norm_ = RmsNorm::load(w, p + ".post_attention_layernorm.weight", eps);
  m.attention_ = GatedAttention::load(w, cfg, p);
  if (cfg.is_moe)
    m.ffn_ = MoeBlock::load(w, cfg, p + ".mlp");
  else
    m.ffn_ = Mlp::load(w, p + ".mlp");
  m.final_norm_ = RmsNorm::load(w, "mtp.norm.weight", eps);
  m.attention_needs_ = m.attention_.input_needs();
  m.ffn_needs_ = std::visit([](const auto& f) { return f.input_needs(); }, m.ffn_);

  // The concatenation is a row gather: rows [0, M) of the stage hold the
  // normalised embeddings, rows [M, 2M) the normalised hidden states, and a
  // [2T, H] gather in the order 0, M, 1, M + 1, ... is [T, 2H] row-major.
  std::vector<int32_t> rows(static_cast<size_t>(2 * max_tokens));
  for (int64_t t = 0; t < max_tokens; ++t) {
    rows[static_cast<size_t>(2 * t)] = static_cast<int32_t>(t);
    rows[static_cast<size_t>(2 * t + 1)] = static_cast<int32_t>(max_tokens + t);
  }
  Backend& be = w.backend();
  m.concat_rows_ = DeviceBuffer(be, DType::kI32, Shape{2 * max_tokens});
  be.copy_to_device(m.concat_rows_.data(), rows.data(), rows.size() * sizeof(int32_t));
  return m;
}

void MtpHead::forward(Backend& be, Scratch& s, const VocabEmbedding& embed, const StepContext& ctx,
                      const TensorView& hidden, const KvCacheView& cache, const TensorView& out) const {
  const int64_t T = ctx.num_tokens, H = hidden_, M = max_tokens_;
  HYLLM_CHECK(T > 0 && T <= M, "MTP step of {} tokens (capacity {})", T, M);
  ScratchScope scope(s);
  TensorView stage = s.take(DType::kBF16, Shape{2 * M, H});
  TensorView emb = s.take(DType::kBF16, Shape{T, H});
  embed.forward(be, ctx.token_ids, emb);
  norm_embedding_.apply(be, emb, stage.slice_rows(0, T));
  norm_hidden_.apply(be, hidden, stage.slice_rows(M, M + T));
  TensorView cat = s.take(DType::kBF16, Shape{2 * T, H});
  gather_rows(be, {stage, concat_rows_.view().slice_rows(0, 2 * T), cat});
  TensorView residual = fc_.forward_one(be, s, cat.reshape(Shape{T, 2 * H}));

  LayerInput x = take_input(s, attention_needs_, T, H);
  input_norm_.apply(be, residual, x);
  TensorView m = attention_.forward(be, s, x, ctx, cache);
  x = take_input(s, ffn_needs_, T, H);
  post_norm_.apply(be, m, x, residual, residual);
  const TensorView f = std::visit([&](const auto& ffn) { return ffn.forward(be, s, x); }, ffn_);
  final_norm_.apply(be, f, out, residual, residual);
}

size_t MtpHead::scratch_bytes(int64_t T) const {
  const size_t rows = Scratch::bytes_for(DType::kBF16, 2 * max_tokens_, hidden_) +
                      Scratch::bytes_for(DType::kBF16, T, hidden_) +
                      Scratch::bytes_for(DType::kBF16, 2 * T, hidden_) + fc_.scratch_bytes(T);
  return rows + input_bytes(attention_needs_, T, hidden_) + attention_.scratch_bytes(T) +
         input_bytes(ffn_needs_, T, hidden_) +
         std::visit([&](const auto& f) { return f.scratch_bytes(T); }, ffn_);
}

}  // namespace hyllm
