#pragma once
// A projection that computes the outputs of several checkpoint linears
// ("parts") reading the same input, merged into as few GEMMs as their storage
// allows, behind one interface whatever the format:
//  - BF16 (or any float type, converted): rows concatenated, always one GEMM;
//  - Qwen block FP8: weight rows and scale-block rows concatenated, which is
//    exact when every part but the last has a multiple of 128 rows; parts are
//    otherwise computed separately (or padded to 128 rows with zero rows when
//    the caller asks, see row_align);
//  - ModelOpt per-tensor FP8: parts with different weight scales are
//    re-quantised to the largest one and share the largest input scale, as
//    vLLM does (one launch; slightly lossy, so greedy tokens may differ from
//    an unmerged reference);
//  - mixed formats: one GEMM per part.
// Each part's output is a ColSlice of a scratch tensor.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "model/layers/activation.h"
#include "model/layers/scratch.h"
#include "model/layers/weights.h"

namespace hyllm {

struct LinearLoadOptions {
  // Pad every part to a multiple of this many rows with zero rows (the padded
  // outputs are zero). Only applied when merging block-FP8 parts needs it.
  int64_t row_align = 1;
  // Pad the input dimension to this many columns with zero columns (0 = none):
  // lets a consumer of a row-padded projection read it unchanged.
  int64_t in_features_padded = 0;
};

// Calibration hook for tools (the ModelOpt quantiser): when set, every
// Linear::forward first passes each part's module name and its input to it.
// Not thread-safe; set it only while no model runs.
using LinearInputObserver = std::function<void(const std::string& module, const TensorView& input)>;
void set_linear_input_observer(LinearInputObserver observer);
// The observer set, or an empty function (for layers that run projections
// inside a fused op and report their inputs themselves).
const LinearInputObserver& linear_input_observer();

// The format of the linear `module` ("layers.0.mlp.down_proj") in `w`, as
// loaded: kFp8Block for a float weight that `w` quantises online.
WeightFormat linear_format(const WeightLoader& w, const std::string& module);

class Linear {
 public:
  Linear() = default;
  static Linear load(WeightLoader& w, const std::vector<std::string>& modules, const LinearLoadOptions& opts = {});

  int num_parts() const { return static_cast<int>(parts_.size()); }
  int num_gemms() const { return static_cast<int>(groups_.size()); }
  int64_t in_features() const { return in_features_; }
  // Output columns of a part, padding included.
  int64_t part_width(int part) const { return parts_[part].width; }
  // True when all parts land in one tensor, contiguous in part order.
  bool contiguous() const { return groups_.size() == 1; }
  WeightFormat format() const { return groups_.empty() ? WeightFormat::kBf16 : groups_[0].w.format; }

  // What this projection reads its input as (see LayerInput).
  InputNeeds input_needs() const;

  // One ColSlice per part. out_dtype kBF16 (activations) or kF32 (logits).
  // An FP8 GEMM reads in.xq when it is in its mode (and, for static scales,
  // quantised with its input scale), else it quantises in.x itself.
  std::vector<ColSlice> forward(Backend& be, Scratch& s, const LayerInput& in, DType out_dtype = DType::kBF16) const;
  std::vector<ColSlice> forward(Backend& be, Scratch& s, const TensorView& x, DType out_dtype = DType::kBF16) const {
    return forward(be, s, LayerInput{x, {}}, out_dtype);
  }
  // The weight of a single-part, single-GEMM linear (for ops that take LinearWeights).
  const LinearWeight& weight() const;
  // Scratch bytes forward() takes for `rows` input rows.
  size_t scratch_bytes(int64_t rows, DType out_dtype = DType::kBF16) const;
  // The single-part case.
  TensorView forward_one(Backend& be, Scratch& s, const LayerInput& in, DType out_dtype = DType::kBF16) const;
  TensorView forward_one(Backend& be, Scratch& s, const TensorView& x, DType out_dtype = DType::kBF16) const {
    return forward_one(be, s, LayerInput{x, {}}, out_dtype);
  }

 private:
  static std::optional<Linear> load_generated(WeightLoader& w, const std::vector<std::string>& modules,
                                              const LinearLoadOptions& opts);
  // linear_online_fp8.cpp: parts quantised on the device (WeightLoader::quantizes_online).
  static std::optional<Linear> load_online_fp8(WeightLoader& w, const std::vector<std::string>& modules,
                                               const LinearLoadOptions& opts);
  struct Group {
    LinearWeight w;
  };
  struct PartLoc {
    std::string module;
    int group = 0;
    int64_t offset = 0;
    int64_t width = 0;
  };
  std::vector<Group> groups_;
  std::vector<PartLoc> parts_;
  int64_t in_features_ = 0;
};

}  // namespace hyllm
