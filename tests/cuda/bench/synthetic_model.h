#pragma once
// A Qwen3.5 decoder (dense or MoE, from a real config.json) built directly
// from the op vocabulary with random weights made on the device: the kernel
// sequence of one forward step at real scale, for timing the CUDA backend
// before and apart from the model code. Weights are merged the way the model
// runs them (q|gate|k|v, GDN qkv|z and b|a, MLP gate|up).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/ops.h"
#include "model/config/model_config.h"

namespace hyllm::bench {

struct StepShape {
  std::vector<int32_t> new_tokens;  // per sequence
  std::vector<int32_t> context;     // cached tokens per sequence before this step
};

class SyntheticModel {
 public:
  // router_skew: the dummy router skew of DummyWeights (0 = random routers).
  SyntheticModel(Backend& be, const ModelConfig& cfg, int64_t max_seqs, int64_t max_tokens, int64_t max_context,
                 float router_skew = 0.0f);

  // Uploads the step's metadata (positions, slots, tables, ...); not timed.
  void plan(const StepShape& step);
  // One forward over the planned step: embedding .. logits of each sequence's
  // last token. With `profile`, the stream is synchronised after every op and
  // the wall time of each op kind is added to it (seconds).
  void forward(std::map<std::string, double>* profile = nullptr);

  // Counts tokens per expert (summed over layers) while on; take_expert_load
  // returns the counts since the last call and zeroes them.
  void count_expert_load(bool on) { count_load_ = on; }
  std::vector<int32_t> take_expert_load();
  // Every layer's MoE block alone on T rows of a random input (MoE models).
  void moe_layers(int64_t T);

  // Bytes of linear weights (and lm_head) the step reads, for the floors.
  int64_t linear_weight_bytes() const { return linear_bytes_; }
  int64_t lm_head_bytes() const { return cfg_.vocab_size * cfg_.hidden_size * 2; }
  int64_t expert_bytes_per_layer_expert() const;
  int64_t gdn_state_bytes_per_seq() const;
  int64_t kv_bytes_per_token() const;
  int64_t linear_params_active_per_token() const;
  int64_t planned_tokens() const { return T_; }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t planned_seqs() const { return S_; }
  // f32 [sequences, vocab]: the last forward's logits of each sequence's last token.
  TensorView logits() const {
    return TensorView(logits_.data(), DType::kF32, {S_, cfg_.vocab_size}, logits_.device());
  }

 private:
  TensorView alloc(DType dtype, Shape shape);
  TensorView weight(Shape shape, float scale, bool counts_as_linear = true);
  TensorView f32_param(Shape shape, float mean, float scale);
  TensorView upload_i32(const std::vector<int32_t>& v, TensorView& dst);

  struct Layer {
    bool attention = false;
    TensorView in_norm, post_norm;
    // attention
    TensorView qkv_w, q_norm, k_norm, o_w, k_cache, v_cache;
    // GDN
    TensorView qkvz_w, ba_w, conv_w, A_log, dt_bias, gnorm, out_w, conv_state, ssm_state;
    // MLP / MoE
    TensorView gate_up_w, down_w, router_w, experts_gate_up, experts_down, shared_gate_up, shared_down;
    // router_w: [E + 1, H], the shared-expert gate row last
  };

  void mixer_attention(const Layer& l, const TensorView& x, const TensorView& out);
  void mixer_gdn(const Layer& l, const TensorView& x, const TensorView& out);
  void ffn(const Layer& l, const TensorView& x, const TensorView& out);
  void tick(const char* name);

  Backend& be_;
  ModelConfig cfg_;
  int64_t max_seqs_, max_tokens_, max_context_, block_size_ = 16, num_blocks_ = 0, max_blocks_per_seq_ = 0;
  std::vector<DeviceBuffer> buffers_;
  std::vector<Layer> layers_;
  TensorView embed_, final_norm_, lm_head_;
  int64_t linear_bytes_ = 0;
  uint64_t seed_ = 1;
  // step metadata and activations (capacity-sized)
  TensorView ids_, positions_, slots_, block_tables_, qsl_, seq_lens_, state_idx_, has_init_, last_rows_;
  TensorView res_, xn_, mo_, big_, big2_, q_, gate_, attn_, expert_load_, moe_x_, last_res_, last_mo_, last_xn_, logits_,
      tokens_out_;
  bool count_load_ = false;
  int64_t T_ = 0, S_ = 0, max_q_ = 0, max_len_ = 0;
  std::map<std::string, double>* profile_ = nullptr;
  double last_tick_ = 0.0;
};

}  // namespace hyllm::bench
