#pragma once
// A loaded language model on a backend. The runner plans a step into a
// StepContext and calls forward(), which returns fp32 logits only for the
// rows it was asked to sample. The model owns its weights and its caches
// (paged KV for attention layers, state slots for GDN layers); it never sees
// the engine, environment variables or devices beyond the Backend interface.
//
//   auto model = load_model("models/x", backend, {.max_num_tokens = 2048});
//   model->allocate_cache(num_blocks, block_size, num_slots);
//   TensorView logits = model->forward(ctx);   // [R, vocab] f32, device memory

#include <cstdint>
#include <filesystem>
#include <memory>

#include "backend/backend.h"
#include "model/config/model_config.h"
#include "model/loader/weight_source.h"
#include "model/step_context.h"

namespace hyllm {

struct ModelOptions {
  int64_t max_num_tokens = 2048;  // the largest step (sizes activation memory)
  int64_t max_num_seqs = 256;     // the most rows sampled in one step
  LoadFormat load_format = LoadFormat::kAuto;
  uint64_t seed = 0;              // for LoadFormat::kDummy
  // Paged KV cache: kBF16, or kF8E4M3 (--kv-cache-dtype fp8) with the
  // checkpoint's per-layer k_scale / v_scale where it has them, else 1.0.
  DType kv_cache_dtype = DType::kBF16;
  // --quantization fp8 on a BF16 checkpoint: the quantizable linears
  // (qwen35_quantizable_linears; not lm_head, in_proj_a/b, the router) are
  // quantised to FP8 at load, on the device, with per-tensor weight scales,
  // and run as block FP8 with dynamic per-token activation scales.
  bool online_fp8 = false;
  float dummy_router_skew = 0.0f; // for LoadFormat::kDummy MoE routers (see DummyWeights)
  // Speculative decoding with the checkpoint's MTP head drafting up to this
  // many tokens per step (0: off; the MTP tensors are then not loaded). The
  // model loads the head, gives it a KV cache (a share of kv_bytes_per_token),
  // keeps the final hidden states of every token, and gives every state slot
  // room for this many saved states (a share of state_bytes_per_slot).
  int num_speculative_tokens = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  virtual Backend& backend() const = 0;
  virtual int64_t vocab_size() const = 0;

  // Cache sizes, per KV token (all attention layers, K and V) and per GDN
  // state slot (all GDN layers, conv and recurrent state).
  virtual size_t kv_bytes_per_token() const = 0;
  virtual size_t state_bytes_per_slot() const = 0;
  virtual int64_t num_attention_layers() const = 0;
  virtual int64_t num_gdn_layers() const = 0;
  // (Re)allocates zeroed caches.
  virtual void allocate_cache(int64_t num_blocks, int64_t block_size, int64_t num_slots) = 0;
  virtual void copy_kv_block(int32_t src, int32_t dst) = 0;
  virtual void copy_state_slot(int32_t src, int32_t dst) = 0;

  // One step; ctx.num_tokens <= max_num_tokens and rows <= max_num_seqs.
  // Returns logits [R, vocab] f32 in device memory, valid until the next call.
  virtual TensorView forward(const StepContext& ctx) = 0;

  // After a forward() with ctx.keep_final_hidden: the logits [r, vocab] f32 of
  // the step's token rows `rows` ([r] i32 device tensor, r <= max_num_seqs x
  // (1 + num_speculative_tokens)), in device memory, valid until the next
  // call of any forward or of this one (they share the logits buffer).
  virtual TensorView final_logits(const TensorView& rows) = 0;

  // Speculative decoding (options().num_speculative_tokens > 0).
  //
  // The MTP head over ctx's tokens (see model/layers/mtp_head.h): token t
  // pairs with row hidden_rows[t] of the final hidden states of the last
  // forward() (from_draft false) or of the last forward_draft()'s outputs
  // (from_draft true), and its KV goes to the head's own cache at ctx's slot
  // mapping. Returns the draft logits [R, vocab] f32 of ctx.sample_rows,
  // valid until the next call of either forward.
  virtual TensorView forward_draft(const StepContext& ctx, const TensorView& hidden_rows, bool from_draft);
  // After a forward() with ctx.keep_spec_states: sequence s of that step goes
  // back to its GDN state (conv and recurrent) after its token keep[s]
  // (keep[s] < num_speculative_tokens), or keeps its state when keep[s] < 0.
  // state_indices and keep: [S] i32 device tensors.
  virtual void rollback_states(const TensorView& state_indices, const TensorView& keep);

  // After a step has finished on the device: logs per-step statistics at
  // debug level (a MoE model: its expert load histogram).
  virtual void log_step_debug() {}

  virtual size_t weight_bytes() const = 0;
  virtual size_t activation_bytes() const = 0;
  virtual const ModelOptions& options() const = 0;
};

// Reads config.json, opens the weights (checked against the architecture's
// tensor catalogue) and builds the model for the architecture.
std::unique_ptr<Model> load_model(const std::filesystem::path& model_dir, Backend& backend,
                                  const ModelOptions& options = {});

}  // namespace hyllm
