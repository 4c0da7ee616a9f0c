// The CUDA DeviceSampler: packs the rows' parameters and token lists into one
// upload, runs the sampling kernel on the backend's stream and reads back the
// tokens (and logprobs): a few bytes per row instead of the logits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/launch/sampling.h"

namespace hyllm {
namespace {

static_assert(cuda::kMaxTopLogprobs == kMaxDeviceTopLogprobs, "the kernel's top logprobs are the interface's");

// A scoring row's sampling parameters must be the defaults: the kernel skips
// those steps for it.
bool plain_scoring_row(const DeviceSamplingRow& row) {
  return row.temperature < 1e-5f && row.top_p == 1.0f && row.top_k <= 0 && row.min_p == 0.0f &&
         row.repetition_penalty == 1.0f && row.frequency_penalty == 0.0f && row.presence_penalty == 0.0f &&
         row.banned_ids.empty() && row.allowed.empty();
}

class CudaSampler final : public DeviceSampler {
 public:
  explicit CudaSampler(Backend& be) : be_(be) {
    kernels_ = dynamic_cast<CudaKernels*>(&be.kernels());
    HYLLM_CHECK(kernels_ != nullptr, "make_cuda_sampler needs the cuda backend, got {}", be.name());
  }
  ~CudaSampler() override {
    cudaFree(dev_);
    cudaFreeHost(host_);
  }

  std::vector<DeviceSampledToken> sample(const TensorView& logits, std::span<const DeviceSamplingRow> rows) override {
    HYLLM_CHECK(logits.dtype() == DType::kF32 && logits.rank() == 2 && logits.dim(0) == static_cast<int64_t>(rows.size()),
                "device sampler: logits {} must be f32 [{}, vocab]", logits.shape().str(), rows.size());
    const int R = static_cast<int>(rows.size());
    const int V = static_cast<int>(logits.dim(1));
    std::vector<DeviceSampledToken> result(rows.size());
    if (R == 0) return result;
    // Host side of the penalties: distinct prompt+output ids, (id, count) of the output.
    params_.assign(rows.size(), {});
    pool_.clear();
    mask_words_.clear();
    for (int r = 0; r < R; ++r) {
      const DeviceSamplingRow& row = rows[r];
      cuda::SamplingRowParams& p = params_[r];
      p.temperature = row.temperature;
      p.top_p = row.top_p;
      p.min_p = row.min_p;
      p.top_k = row.top_k;
      p.repetition_penalty = row.repetition_penalty;
      p.frequency_penalty = row.frequency_penalty;
      p.presence_penalty = row.presence_penalty;
      p.num_logprobs = std::min(row.num_logprobs, cuda::kMaxTopLogprobs);
      p.seed = row.seed;
      p.sample_index = row.sample_index;
      if (row.target >= 0) {
        HYLLM_CHECK(row.target < V && plain_scoring_row(row),
                    "device sampler: scoring row {} has target {} (vocab {}) or sampling parameters", r, row.target, V);
        p.target = row.target;
      }
      if (!row.allowed.empty()) {
        HYLLM_CHECK(row.allowed.size() * 32 >= static_cast<size_t>(V), "token bitmask of {} words for vocab {}",
                    row.allowed.size(), V);
        p.mask_offset = static_cast<int64_t>(mask_words_.size());
        mask_words_.insert(mask_words_.end(), row.allowed.begin(), row.allowed.begin() + (V + 31) / 32);
      }
      p.banned_begin = static_cast<int32_t>(pool_.size());
      pool_.insert(pool_.end(), row.banned_ids.begin(), row.banned_ids.end());
      p.banned_end = static_cast<int32_t>(pool_.size());
      p.rep_begin = p.rep_end = p.count_begin = p.count_end = p.banned_end;
      if (row.repetition_penalty != 1.0f) {
        scratch_.assign(row.prompt_ids.begin(), row.prompt_ids.end());
        scratch_.insert(scratch_.end(), row.output_ids.begin(), row.output_ids.end());
        std::sort(scratch_.begin(), scratch_.end());
        scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
        pool_.insert(pool_.end(), scratch_.begin(), scratch_.end());
        p.rep_end = static_cast<int32_t>(pool_.size());
      }
      p.count_begin = p.count_end = static_cast<int32_t>(pool_.size());
      if (row.frequency_penalty != 0.0f || row.presence_penalty != 0.0f) {
        scratch_.assign(row.output_ids.begin(), row.output_ids.end());
        std::sort(scratch_.begin(), scratch_.end());
        for (size_t i = 0; i < scratch_.size();) {
          size_t j = i;
          while (j < scratch_.size() && scratch_[j] == scratch_[i]) ++j;
          pool_.push_back(scratch_[i]);
          pool_.push_back(static_cast<int32_t>(j - i));
          i = j;
        }
        p.count_end = static_cast<int32_t>(pool_.size());
      }
    }
    // One pinned staging area and one device area: [params | pool | masks] up, results down.
    const size_t b_params = align(R * sizeof(cuda::SamplingRowParams)), b_pool = align(pool_.size() * 4 + 4);
    const size_t b_masks = align(mask_words_.size() * 4);
    // Results: [tokens | logprobs | ranks | top ids | top logprobs], 4-byte
    // entries without gaps, every byte written by the kernel (the ranks only
    // when some row scores a target, the top arrays, padded past each row's
    // count, only when some row asks for them), so that the copy back reads
    // only what the kernel wrote.
    bool want_top = false, want_rank = false;
    for (const auto& prm : params_) {
      want_top = want_top || prm.num_logprobs > 0;
      want_rank = want_rank || prm.target >= 0;
    }
    const size_t b_tok = size_t{4} * R, b_lp = size_t{4} * R, b_rank = want_rank ? size_t{4} * R : 0;
    const size_t b_top = want_top ? size_t{4} * R * cuda::kMaxTopLogprobs : 0;
    const size_t up = b_params + b_pool + b_masks, down = b_tok + b_lp + b_rank + 2 * b_top;
    reserve(up + down);
    char* h = static_cast<char*>(host_);
    std::memcpy(h, params_.data(), R * sizeof(cuda::SamplingRowParams));
    std::memcpy(h + b_params, pool_.data(), pool_.size() * 4);
    if (!mask_words_.empty()) std::memcpy(h + b_params + b_pool, mask_words_.data(), mask_words_.size() * 4);
    cudaStream_t stream = kernels_->stream();
    char* d = static_cast<char*>(dev_);
    HYLLM_CUDA_CHECK(cudaMemcpyAsync(d, h, up, cudaMemcpyHostToDevice, stream));
    cuda::SamplingLaunch l;
    l.logits = logits.data_as<float>();
    l.ld = V;
    l.rows = R;
    l.vocab = V;
    l.params = reinterpret_cast<const cuda::SamplingRowParams*>(d);
    l.pool = reinterpret_cast<const int32_t*>(d + b_params);
    l.mask_words = reinterpret_cast<const uint32_t*>(d + b_params + b_pool);
    l.out_token = reinterpret_cast<int32_t*>(d + up);
    l.out_logprob = reinterpret_cast<float*>(d + up + b_tok);
    l.out_rank = want_rank ? reinterpret_cast<int32_t*>(d + up + b_tok + b_lp) : nullptr;
    const size_t top_at = up + b_tok + b_lp + b_rank;
    l.out_top_ids = want_top ? reinterpret_cast<int32_t*>(d + top_at) : nullptr;
    l.out_top_logprobs = want_top ? reinterpret_cast<float*>(d + top_at + b_top) : nullptr;
    l.work = static_cast<float*>(kernels_->scratch(static_cast<size_t>(R) * V * sizeof(float)));
    cuda::launch_sampling(l, stream);
    HYLLM_CUDA_CHECK(cudaGetLastError());
    HYLLM_CUDA_CHECK(cudaMemcpyAsync(h + up, d + up, down, cudaMemcpyDeviceToHost, stream));
    HYLLM_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto* tok = reinterpret_cast<const int32_t*>(h + up);
    const auto* lp = reinterpret_cast<const float*>(h + up + b_tok);
    const auto* rank = reinterpret_cast<const int32_t*>(h + up + b_tok + b_lp);
    const auto* top_ids = reinterpret_cast<const int32_t*>(h + top_at);
    const auto* top_lp = reinterpret_cast<const float*>(h + top_at + b_top);
    for (int r = 0; r < R; ++r) {
      result[r].token = tok[r];
      result[r].logprob = lp[r];
      if (want_rank) result[r].rank = rank[r];
      const int n = std::min(params_[r].num_logprobs, V);
      for (int i = 0; i < n; ++i) {
        result[r].top_logprobs.emplace_back(top_ids[r * cuda::kMaxTopLogprobs + i],
                                            top_lp[r * cuda::kMaxTopLogprobs + i]);
      }
    }
    return result;
  }

 private:
  static size_t align(size_t b) { return (b + 255) & ~size_t{255}; }
  void reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    HYLLM_CUDA_CHECK(cudaStreamSynchronize(kernels_->stream()));
    cudaFree(dev_);
    cudaFreeHost(host_);
    capacity_ = std::max(bytes, 2 * capacity_);
    HYLLM_CUDA_CHECK(cudaMalloc(&dev_, capacity_));
    HYLLM_CUDA_CHECK(cudaMallocHost(&host_, capacity_));
  }

  Backend& be_;
  CudaKernels* kernels_ = nullptr;
  void* dev_ = nullptr;
  void* host_ = nullptr;
  size_t capacity_ = 0;
  std::vector<cuda::SamplingRowParams> params_;
  std::vector<int32_t> pool_, scratch_;
  std::vector<uint32_t> mask_words_;
};

}  // namespace

std::unique_ptr<DeviceSampler> make_cuda_sampler(Backend& cuda_backend) {
  return std::make_unique<CudaSampler>(cuda_backend);
}

}  // namespace hyllm
