#include "model/qwen3_5.h"

#include <algorithm>
#include <optional>
#include <variant>
#include <vector>

#include "model/layers/attention.h"
#include "model/layers/gated_delta_net.h"
#include "model/layers/linear.h"
#include "model/layers/mlp.h"
#include "model/layers/moe.h"
#include "model/layers/mtp_head.h"
#include "model/layers/params.h"
#include "model/layers/scratch.h"
#include "model/layers/tensor_parallel.h"
#include "model/loader/qwen35_catalogue.h"
#include "util/log.h"

namespace hyllm {

namespace {

struct Layer {
  RmsNorm input_norm;
  RmsNorm post_norm;
  std::variant<GatedAttention, GatedDeltaNet> mixer;
  std::variant<Mlp, MoeBlock> ffn;
  int cache_index = 0;  // index among the layers of its kind
  InputNeeds mixer_needs, ffn_needs;  // what the two norms must write
};

// The startup line that says how the KV cache is stored.
void log_kv_cache_dtype(DType dtype, const std::vector<Layer>& layers) {
  int attention = 0, scaled = 0;
  for (const Layer& l : layers) {
    if (const auto* a = std::get_if<GatedAttention>(&l.mixer)) {
      ++attention;
      scaled += a->has_kv_scales() ? 1 : 0;
    }
  }
  if (dtype != DType::kF8E4M3) {
    log::info("KV cache dtype: {}", dtype_name(dtype));
    return;
  }
  log::info("KV cache dtype: fp8_e4m3 (half the bytes per token of bfloat16); k/v scales from the checkpoint on {} "
            "of {} attention layers", scaled, attention);
  if (scaled < attention) {
    log::warn("Using KV cache scaling factor 1.0 on {} attention layers without checkpoint k_scale/v_scale: K/V "
              "values beyond +-448 saturate", attention - scaled);
  }
}

// --quantization fp8 on a BF16 checkpoint.
void enable_online_fp8(WeightLoader& w, const ModelConfig& cfg) {
  if (cfg.quant.is_fp8())
    fail(ErrorCode::kInvalidArgument, "online FP8 quantization needs a BF16 checkpoint; this one is {}",
         quant_method_name(cfg.quant.method));
  const std::vector<std::string> modules = qwen35_quantizable_linears(cfg);
  w.set_online_fp8_modules({modules.begin(), modules.end()});
  log::info("quantizing the linear weights to FP8 on load (per-tensor weight scales, dynamic per-token activation "
            "scales){}", cfg.is_moe ? "; routed experts stored fused stay BF16, per-expert ones become block FP8" : "");
}

struct AttentionCache {
  DeviceBuffer k, v;
};
struct GdnCache {
  DeviceBuffer conv, recurrent;
  DeviceBuffer spec_conv, spec_recurrent;  // speculative decoding: [slots, K_spec, ...]
};

class Qwen35Model final : public Model {
 public:
  Qwen35Model(const ModelConfig& cfg, const WeightSource& src, Backend& be, const ModelOptions& opts)
      : cfg_(cfg), be_(be), opts_(opts) {
    if (opts.kv_cache_dtype != DType::kBF16 && opts.kv_cache_dtype != DType::kF8E4M3)
      fail(ErrorCode::kInvalidArgument, "KV cache dtype {} is not supported (bfloat16 or float8_e4m3fn)",
           dtype_name(opts.kv_cache_dtype));
    WeightLoader w(be, src);
    if (opts.online_fp8) enable_online_fp8(w, cfg);
    const float eps = static_cast<float>(cfg.rms_norm_eps);
    const TensorView embed = w.load("embed_tokens.weight", DType::kBF16);
    embed_ = VocabEmbedding(be, embed, cfg.vocab_size);
    if (cfg.is_moe && spdlog::should_log(spdlog::level::debug)) {  // counts for log_step_debug
      expert_load_ = DeviceBuffer(be, DType::kI32, Shape{cfg.num_hidden_layers, cfg.num_experts});
      be.fill_zero(expert_load_.data(), expert_load_.size());
    }
    int attn = 0, gdn = 0;
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      const std::string p = "layers." + std::to_string(i);
      Layer l{RmsNorm::load(w, p + ".input_layernorm.weight", eps),
              RmsNorm::load(w, p + ".post_attention_layernorm.weight", eps),
              GatedAttention{}, Mlp{}, 0};
      if (cfg.layer_types[i] == LayerType::kFullAttention) {
        l.mixer = GatedAttention::load(w, cfg, p);
        l.cache_index = attn++;
      } else {
        l.mixer = GatedDeltaNet::load(w, cfg, p);
        l.cache_index = gdn++;
      }
      if (cfg.is_moe) {
        TensorView load;
        if (expert_load_.size()) load = expert_load_.view().slice_rows(i, i + 1).reshape(Shape{cfg.num_experts});
        l.ffn = MoeBlock::load(w, cfg, p + ".mlp", load);
      } else {
        l.ffn = Mlp::load(w, p + ".mlp");
      }
      l.mixer_needs = std::visit([](const auto& m) { return m.input_needs(); }, l.mixer);
      l.ffn_needs = std::visit([](const auto& f) { return f.input_needs(); }, l.ffn);
      layers_.push_back(std::move(l));
    }
    final_norm_ = RmsNorm::load(w, "norm.weight", eps);
    lm_head_ = VocabLmHead(be, cfg.tie_word_embeddings ? LinearWeight::bf16(embed) : Linear::load(w, {"lm_head"}).weight(),
                           cfg.vocab_size);
    num_attention_ = attn;
    num_gdn_ = gdn;
    log_kv_cache_dtype(opts.kv_cache_dtype, layers_);
    if (opts.num_speculative_tokens > 0) {
      if (!MtpHead::present(w))
        fail(ErrorCode::kInvalidArgument, "{}: speculative decoding with method \"mtp\" needs the checkpoint's MTP "
             "head (mtp.* tensors, config.json mtp_num_hidden_layers), which this checkpoint does not have",
             src.describe());
      const size_t before = w.device_bytes();
      mtp_ = MtpHead::load(w, cfg, opts.max_num_tokens);
      log::info("speculative decoding: MTP head loaded ({:.1f} MiB), up to {} draft tokens per step; each GDN "
                "state slot holds {} states (the live one and one per draft position)",
                (w.device_bytes() - before) / double(1 << 20), opts.num_speculative_tokens,
                1 + opts.num_speculative_tokens);
    }

    auto left = w.unconsumed();
    if (!mtp_) std::erase_if(left, [](const std::string& n) { return n.starts_with("mtp."); });
    if (!left.empty())
      fail(ErrorCode::kCorruptData, "{}: {} tensors were not used by the model, e.g. {}", src.describe(),
           left.size(), left.front());
    weight_bytes_ = w.device_bytes();
    weight_buffers_ = w.take_buffers();
    allocate_activations();
  }

  const ModelConfig& config() const override { return cfg_; }
  Backend& backend() const override { return be_; }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  const ModelOptions& options() const override { return opts_; }
  size_t weight_bytes() const override { return weight_bytes_; }
  size_t activation_bytes() const override { return activation_bytes_; }
  int64_t num_attention_layers() const override { return num_attention_; }
  int64_t num_gdn_layers() const override { return num_gdn_; }

  size_t kv_bytes_per_token() const override {
    return static_cast<size_t>((num_attention_ + (mtp_ ? 1 : 0)) * 2 * cfg_.num_key_value_heads * cfg_.head_dim) *
           dtype_size(opts_.kv_cache_dtype);
  }
  size_t state_bytes_per_slot() const override {
    size_t conv = static_cast<size_t>((cfg_.linear_conv_kernel_dim - 1) * cfg_.linear_conv_dim()) * 2;
    size_t rec = static_cast<size_t>(cfg_.linear_num_value_heads * cfg_.linear_value_head_dim *
                                     cfg_.linear_key_head_dim) * 4;
    return num_gdn_ * (conv + rec) * static_cast<size_t>(1 + opts_.num_speculative_tokens);
  }

  void allocate_cache(int64_t num_blocks, int64_t block_size, int64_t num_slots) override {
    attn_cache_.clear();
    gdn_cache_.clear();
    for (int i = 0; i < num_attention_ + (mtp_ ? 1 : 0); ++i) {  // the MTP head's cache last
      Shape s{num_blocks, block_size, cfg_.num_key_value_heads, cfg_.head_dim};
      AttentionCache c{DeviceBuffer(be_, opts_.kv_cache_dtype, s), DeviceBuffer(be_, opts_.kv_cache_dtype, s)};
      be_.fill_zero(c.k.data(), c.k.size());
      be_.fill_zero(c.v.data(), c.v.size());
      attn_cache_.push_back(std::move(c));
    }
    const int64_t K = opts_.num_speculative_tokens;
    for (int i = 0; i < num_gdn_; ++i) {
      GdnCache c{DeviceBuffer(be_, DType::kBF16,
                              Shape{num_slots, cfg_.linear_conv_kernel_dim - 1, cfg_.linear_conv_dim()}),
                 DeviceBuffer(be_, DType::kF32,
                              Shape{num_slots, cfg_.linear_num_value_heads, cfg_.linear_value_head_dim,
                                    cfg_.linear_key_head_dim})};
      be_.fill_zero(c.conv.data(), c.conv.size());
      be_.fill_zero(c.recurrent.data(), c.recurrent.size());
      if (K > 0) {  // written before they are read (by a verify step, then rollback_states)
        c.spec_conv = DeviceBuffer(be_, DType::kBF16, Shape{num_slots, K, cfg_.linear_conv_kernel_dim - 1,
                                                            cfg_.linear_conv_dim()});
        c.spec_recurrent = DeviceBuffer(be_, DType::kF32, Shape{num_slots, K, cfg_.linear_num_value_heads,
                                                                cfg_.linear_value_head_dim, cfg_.linear_key_head_dim});
      }
      gdn_cache_.push_back(std::move(c));
    }
    num_blocks_ = num_blocks;
    num_slots_ = num_slots;
  }

  void copy_kv_block(int32_t src, int32_t dst) override {
    HYLLM_CHECK(src >= 0 && dst >= 0 && src < num_blocks_ && dst < num_blocks_, "kv block {} -> {}", src, dst);
    for (auto& c : attn_cache_) {
      size_t bytes = c.k.size() / static_cast<size_t>(num_blocks_);
      be_.copy_on_device(static_cast<char*>(c.k.data()) + dst * bytes,
                         static_cast<char*>(c.k.data()) + src * bytes, bytes);
      be_.copy_on_device(static_cast<char*>(c.v.data()) + dst * bytes,
                         static_cast<char*>(c.v.data()) + src * bytes, bytes);
    }
  }

  void copy_state_slot(int32_t src, int32_t dst) override {
    HYLLM_CHECK(src >= 0 && dst >= 0 && src < num_slots_ && dst < num_slots_, "state slot {} -> {}", src, dst);
    for (auto& c : gdn_cache_) {
      for (DeviceBuffer* b : {&c.conv, &c.recurrent}) {
        size_t bytes = b->size() / static_cast<size_t>(num_slots_);
        be_.copy_on_device(static_cast<char*>(b->data()) + dst * bytes,
                           static_cast<char*>(b->data()) + src * bytes, bytes);
      }
    }
  }

  // The expert load is summed on the device over a window of steps and
  // logged once a window at debug level, or after every step at trace level:
  // copying it back every step would add a device sync and a log line to
  // every decode step of a server run at debug level, whose step times
  // (tools/cuda/serve_bench.sh) then would not be those of a production run.
  void log_step_debug() override {
    if (expert_load_.size() == 0) return;
    ++load_steps_;
    if (load_steps_ < kLoadLogSteps && !spdlog::should_log(spdlog::level::trace)) return;
    std::vector<int32_t> load(expert_load_.size() / sizeof(int32_t));
    be_.copy_to_host(load.data(), expert_load_.data(), expert_load_.size());
    be_.fill_zero(expert_load_.data(), expert_load_.size());
    log::debug("moe load over {} step{}: {}", load_steps_, load_steps_ == 1 ? "" : "s",
               moe_load_summary(load, cfg_.num_experts));
    load_steps_ = 0;
  }

  TensorView forward(const StepContext& ctx) override {
    const int64_t T = ctx.num_tokens;
    const int64_t R = ctx.sample_rows.numel();
    HYLLM_CHECK(T > 0 && T <= opts_.max_num_tokens, "step of {} tokens (capacity {})", T, opts_.max_num_tokens);
    HYLLM_CHECK(R <= logits_.view().dim(0), "{} sampled rows (capacity {})", R, logits_.view().dim(0));
    HYLLM_CHECK(num_attention_ == 0 || !attn_cache_.empty(), "forward before allocate_cache");
    scratch_.release(0);
    hidden_tokens_ = 0;
    const int64_t H = cfg_.hidden_size;
    TensorView residual = residual_.view().slice_rows(0, T);
    TensorView logits = logits_.view().slice_rows(0, R);

    embed_.forward(be_, ctx.token_ids, residual);
    LayerInput x = inputs_.view(layers_[0].mixer_needs, T);
    layers_[0].input_norm.apply(be_, residual, x);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      {
        ScratchScope scope(scratch_);
        TensorView m;
        if (const auto* a = std::get_if<GatedAttention>(&l.mixer)) {
          const auto& c = attn_cache_[l.cache_index];
          m = a->forward(be_, scratch_, x, ctx, KvCacheView{c.k.view(), c.v.view()});
        } else {
          const auto& c = gdn_cache_[l.cache_index];
          GdnStateView state{c.conv.view(), c.recurrent.view()};
          if (ctx.keep_spec_states) {
            HYLLM_CHECK(opts_.num_speculative_tokens > 0, "a verify step without speculative state room");
            state.spec_conv = c.spec_conv.view();
            state.spec_recurrent = c.spec_recurrent.view();
          }
          m = std::get<GatedDeltaNet>(l.mixer).forward(be_, scratch_, x, ctx, state);
        }
        x = inputs_.view(l.ffn_needs, T);
        l.post_norm.apply(be_, m, x, residual, residual);
      }
      ScratchScope scope(scratch_);
      TensorView f;
      if (const auto* mlp = std::get_if<Mlp>(&l.ffn))
        f = mlp->forward(be_, scratch_, x);
      else
        f = std::get<MoeBlock>(l.ffn).forward(be_, scratch_, x);
      if (i + 1 < layers_.size()) {
        x = inputs_.view(layers_[i + 1].mixer_needs, T);
        layers_[i + 1].input_norm.apply(be_, f, x, residual, residual);
        continue;
      }
      if (mtp_ || ctx.keep_final_hidden) {  // the draft head (or final_logits) reads every token's
        TensorView hidden = hidden_.view().slice_rows(0, T);
        hidden_tokens_ = T;
        final_norm_.apply(be_, f, hidden, residual, residual);
        lm_head_rows(hidden, ctx.sample_rows);
        break;
      }
      // Last layer: finish the residual stream only at the sampled rows.
      if (R == 0) break;
      TensorView f_rows = scratch_.take(DType::kBF16, Shape{R, H});
      TensorView r_rows = scratch_.take(DType::kBF16, Shape{R, H});
      TensorView normed = scratch_.take(DType::kBF16, Shape{R, H});
      gather_rows(be_, {f, ctx.sample_rows, f_rows});
      gather_rows(be_, {residual, ctx.sample_rows, r_rows});
      final_norm_.apply(be_, f_rows, normed, r_rows, r_rows);
      lm_head_.forward(be_, scratch_, normed, logits);
    }
    return logits;
  }

  TensorView forward_draft(const StepContext& ctx, const TensorView& hidden_rows, bool from_draft) override {
    HYLLM_CHECK(mtp_.has_value(), "forward_draft without an MTP head");
    const int64_t T = ctx.num_tokens, R = ctx.sample_rows.numel(), H = cfg_.hidden_size;
    HYLLM_CHECK(T > 0 && T <= opts_.max_num_tokens, "draft step of {} tokens (capacity {})", T, opts_.max_num_tokens);
    HYLLM_CHECK(R <= logits_.view().dim(0), "{} sampled draft rows (capacity {})", R, logits_.view().dim(0));
    scratch_.release(0);
    TensorView in = scratch_.take(DType::kBF16, Shape{T, H});
    gather_rows(be_, {(from_draft ? draft_hidden_ : hidden_).view(), hidden_rows, in});
    TensorView out = draft_hidden_.view().slice_rows(0, T);
    const auto& c = attn_cache_.back();
    mtp_->forward(be_, scratch_, embed_, ctx, in, KvCacheView{c.k.view(), c.v.view()}, out);
    return lm_head_rows(out, ctx.sample_rows);
  }

  TensorView final_logits(const TensorView& rows) override {
    const int64_t R = rows.numel();
    HYLLM_CHECK(R > 0 && R <= logits_.view().dim(0), "{} final-logit rows (capacity {})", R, logits_.view().dim(0));
    HYLLM_CHECK(hidden_tokens_ > 0, "final_logits after a forward that kept no final hidden states");
    scratch_.release(0);
    return lm_head_rows(hidden_.view().slice_rows(0, hidden_tokens_), rows);
  }

  void rollback_states(const TensorView& state_indices, const TensorView& keep) override {
    HYLLM_CHECK(opts_.num_speculative_tokens > 0, "rollback_states without speculative decoding");
    for (auto& c : gdn_cache_) {
      select_state(be_, {c.conv.view(), c.spec_conv.view(), state_indices, keep});
      select_state(be_, {c.recurrent.view(), c.spec_recurrent.view(), state_indices, keep});
    }
  }

 private:
  // The logits [R, vocab] of rows `rows` ([R] i32) of final (normalised)
  // hidden states, in logits_; the gathered rows take scratch.
  TensorView lm_head_rows(const TensorView& hidden, const TensorView& rows) {
    const int64_t R = rows.numel();
    TensorView logits = logits_.view().slice_rows(0, R);
    if (R == 0) return logits;
    TensorView gathered = scratch_.take(DType::kBF16, Shape{R, cfg_.hidden_size});
    gather_rows(be_, {hidden, rows, gathered});
    lm_head_.forward(be_, scratch_, gathered, logits);
    return logits;
  }

  void allocate_activations() {
    const int64_t T = opts_.max_num_tokens, R = opts_.max_num_seqs, H = cfg_.hidden_size;
    size_t mixer = 0, ffn = 0;
    for (const auto& l : layers_) {
      mixer = std::max(mixer, std::visit([&](const auto& m) { return m.scratch_bytes(T); }, l.mixer));
      ffn = std::max(ffn, std::visit([&](const auto& f) { return f.scratch_bytes(T); }, l.ffn));
    }
    const int64_t rows = R * (1 + opts_.num_speculative_tokens);  // a verify step samples 1 + K rows per sequence
    size_t final_rows = 3 * Scratch::bytes_for(DType::kBF16, rows, H) + lm_head_.scratch_bytes(rows);
    size_t draft = 0;
    if (mtp_) draft = 2 * Scratch::bytes_for(DType::kBF16, T, H) + mtp_->scratch_bytes(T) + final_rows;
    scratch_ = Scratch(be_, std::max(mixer + ffn + final_rows, draft));
    bool fp8 = false;
    for (const auto& l : layers_) fp8 = fp8 || l.mixer_needs.mode != ActQuantMode::kNone ||
                                        l.ffn_needs.mode != ActQuantMode::kNone;
    residual_ = DeviceBuffer(be_, DType::kBF16, Shape{T, H});
    inputs_ = ActivationBuffers(be_, T, H, fp8);
    logits_ = DeviceBuffer(be_, DType::kF32, Shape{rows, cfg_.vocab_size});
    hidden_ = DeviceBuffer(be_, DType::kBF16, Shape{T, H});  // the draft head's input, or final_logits'
    if (mtp_) draft_hidden_ = DeviceBuffer(be_, DType::kBF16, Shape{T, H});
    activation_bytes_ = scratch_.capacity() + residual_.size() + inputs_.bytes() + logits_.size() + hidden_.size() +
                        draft_hidden_.size();
  }

  ModelConfig cfg_;
  Backend& be_;
  ModelOptions opts_;
  std::vector<DeviceBuffer> weight_buffers_;
  VocabEmbedding embed_;
  std::vector<Layer> layers_;
  RmsNorm final_norm_;
  VocabLmHead lm_head_;
  std::optional<MtpHead> mtp_;  // speculative decoding only
  int num_attention_ = 0, num_gdn_ = 0;
  size_t weight_bytes_ = 0, activation_bytes_ = 0;

  Scratch scratch_;
  DeviceBuffer residual_, logits_;
  // Final hidden states of forward() (with the MTP head, or ctx.keep_final_hidden:
  // hidden_tokens_ rows, else none) and, with the MTP head, of forward_draft().
  DeviceBuffer hidden_, draft_hidden_;
  int64_t hidden_tokens_ = 0;
  ActivationBuffers inputs_;  // the normalised input of the current block
  DeviceBuffer expert_load_;  // [layers, E] i32 at debug level (MoE), summed over load_steps_ steps
  static constexpr int kLoadLogSteps = 200;  // the runner's timing window
  int load_steps_ = 0;
  std::vector<AttentionCache> attn_cache_;  // the attention layers', then the MTP head's
  std::vector<GdnCache> gdn_cache_;
  int64_t num_blocks_ = 0, num_slots_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_qwen3_5(const ModelConfig& config, const WeightSource& weights, Backend& backend,
                                    const ModelOptions& options) {
  return std::make_unique<Qwen35Model>(config, weights, backend, options);
}

}  // namespace hyllm
