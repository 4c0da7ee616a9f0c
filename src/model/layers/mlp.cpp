#include "model/layers/mlp.h"

namespace hyllm {

Mlp Mlp::load(WeightLoader& w, const std::string& prefix) {
  Mlp m;
  const std::string gate = prefix + ".gate_proj", up = prefix + ".up_proj", down = prefix + ".down_proj";
  int64_t inter = w.info(gate + ".weight").shape[0];
  bool pad = linear_format(w, gate) == WeightFormat::kFp8Block && inter % kFp8BlockSize != 0;
  LinearLoadOptions gu_opts;
  gu_opts.row_align = pad ? kFp8BlockSize : 1;
  m.gate_up_ = Linear::load(w, {gate, up}, gu_opts);
  if (!m.gate_up_.contiguous() || m.gate_up_.part_width(0) != m.gate_up_.part_width(1))
    fail(ErrorCode::kUnsupported, "{}: gate_proj and up_proj are stored in formats that cannot share one GEMM",
         prefix);
  m.width_ = m.gate_up_.part_width(0);
  LinearLoadOptions down_opts;
  down_opts.in_features_padded = m.width_;
  m.down_ = Linear::load(w, {down}, down_opts);
  m.down_sum_ = RowParallelSum(w.backend());
  m.hidden_ = m.down_.part_width(0);
  return m;
}

TensorView Mlp::forward(Backend& be, Scratch& s, const LayerInput& in) const {
  auto gu = gate_up_.forward(be, s, in);
  LayerInput act = take_input(s, down_.input_needs(), in.rows(), width_);
  swiglu(be, {gu[0].tensor, act.x, act.xq});
  return down_sum_.reduce(be, s, down_.forward_one(be, s, act, down_sum_.partial_dtype()));
}

size_t Mlp::scratch_bytes(int64_t T) const {
  return gate_up_.scratch_bytes(T) + input_bytes(down_.input_needs(), T, width_) +
         down_.scratch_bytes(T, down_sum_.partial_dtype()) + down_sum_.scratch_bytes(T, hidden_);
}

}  // namespace hyllm
