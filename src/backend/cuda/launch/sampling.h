#pragma once
// Launcher of the GPU sampler (see launch/dense.h for the conventions of these
// headers). Semantics are the host sampler's (engine/sampler.h), step by step.

#include <cuda_runtime.h>

#include <cstdint>

namespace hyllm::cuda {

inline constexpr int kMaxTopLogprobs = 32;

struct SamplingRowParams {
  float temperature = 0.0f;  // < 1e-5: greedy
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t top_k = 0;
  int32_t num_logprobs = -1;  // -1: none; 0: the sampled token's; N: also the top N
  uint64_t seed = 0;
  uint64_t sample_index = 0;
  // Ranges of the shared int32 pool: banned ids; the distinct ids of prompt and
  // output (repetition penalty); (id, count) pairs of the output (frequency and
  // presence penalties), two ints each.
  int32_t banned_begin = 0, banned_end = 0;
  int32_t rep_begin = 0, rep_end = 0;
  int32_t count_begin = 0, count_end = 0;
  // Structured output: word offset of this row's allowed-token bitmask in the
  // shared mask words (bit t % 32 of word t / 32 set = allowed); -1: none.
  int64_t mask_offset = -1;
  // >= 0: score this token instead of sampling (the defaults above, no mask):
  // out_token = target, out_logprob its raw logprob, out_rank its rank.
  int32_t target = -1;
};

struct SamplingLaunch {
  // [rows, vocab], row stride ld. Rows with a mask get their disallowed
  // logits set to -inf in place before anything reads them.
  float* logits = nullptr;
  int64_t ld = 0;
  int rows = 0;
  int vocab = 0;
  const SamplingRowParams* params = nullptr;  // device [rows]
  const int32_t* pool = nullptr;              // device
  const uint32_t* mask_words = nullptr;       // device; the rows' bitmasks (mask_offset)
  float* work = nullptr;                      // device scratch [rows, vocab]
  int32_t* out_token = nullptr;               // device [rows]; -1 when every token is masked
  float* out_logprob = nullptr;               // device [rows]
  // device [rows]: a target's rank, 1 + the ids with a higher raw logit (0 for
  // rows without one); null when no row has a target.
  int32_t* out_rank = nullptr;
  // device [rows, kMaxTopLogprobs], or null when no row asks for top
  // logprobs; the slots past a row's count hold -1 / -inf.
  int32_t* out_top_ids = nullptr;
  float* out_top_logprobs = nullptr;
};
void launch_sampling(const SamplingLaunch& p, cudaStream_t stream);

}  // namespace hyllm::cuda
