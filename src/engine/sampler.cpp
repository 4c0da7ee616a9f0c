#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "engine/logprobs.h"
#include "util/counter_rng.h"
#include "util/status.h"

namespace hyllm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// vLLM's _SAMPLING_EPS: temperatures below it mean greedy.
constexpr float kGreedyTemperature = 1e-5f;

int32_t argmax(std::span<const float> values) {
  // std::max_element returns the first maximum: the lowest id wins ties.
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

}  // namespace

double sampler_uniform(uint64_t seed, uint64_t sample_index) {
  const uint64_t bits = rng::mix(rng::mix(seed) ^ sample_index);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

void apply_bans_and_penalties(std::span<float> logits, const SeqWork& work, std::vector<int32_t>& scratch) {
  const SamplingParams& p = *work.sampling;
  const size_t vocab = logits.size();
  for (int32_t t : work.banned_token_ids) {
    if (t >= 0 && static_cast<size_t>(t) < vocab) logits[static_cast<size_t>(t)] = kNegInf;
  }
  for (const auto& [t, bias] : p.logit_bias) {
    if (t >= 0 && static_cast<size_t>(t) < vocab) logits[static_cast<size_t>(t)] += bias;
  }
  if (p.repetition_penalty != 1.0f) {
    // Each distinct token once, whether it occurs in the prompt, the output or both.
    scratch.assign(work.prompt_ids.begin(), work.prompt_ids.end());
    scratch.insert(scratch.end(), work.output_ids.begin(), work.output_ids.end());
    std::sort(scratch.begin(), scratch.end());
    scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
    for (int32_t t : scratch) {
      if (t < 0 || static_cast<size_t>(t) >= vocab) continue;
      float& v = logits[static_cast<size_t>(t)];
      v = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    scratch.assign(work.output_ids.begin(), work.output_ids.end());
    std::sort(scratch.begin(), scratch.end());
    for (size_t i = 0; i < scratch.size();) {
      size_t j = i;
      while (j < scratch.size() && scratch[j] == scratch[i]) ++j;
      const int32_t t = scratch[i];
      if (t >= 0 && static_cast<size_t>(t) < vocab) {
        logits[static_cast<size_t>(t)] -= p.frequency_penalty * static_cast<float>(j - i) + p.presence_penalty;
      }
      i = j;
    }
  }
}

void apply_temperature_and_masks(std::span<float> logits, const SamplingParams& p, std::vector<int32_t>& order) {
  const size_t vocab = logits.size();
  const float inv_t = 1.0f / p.temperature;
  for (float& v : logits) v *= inv_t;
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  if (max_logit == kNegInf) return;
  if (p.min_p > 0.0f) {
    // prob(t) < min_p * prob(max)  <=>  logit(t) < max_logit + log(min_p)
    const float threshold = max_logit + std::log(p.min_p);
    for (float& v : logits) {
      if (v < threshold) v = kNegInf;
    }
  }
  const bool use_top_k = p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab;
  if (!use_top_k && p.top_p >= 1.0f) return;

  // Candidates are the unmasked ids. Selection instead of a full sort keeps a
  // row of a 250k vocabulary cheap; the ranking is total (logit descending,
  // id ascending), so the result does not depend on the algorithm.
  auto logit = [&](int32_t id) { return logits[static_cast<size_t>(id)]; };
  auto better = [&](int32_t a, int32_t b) { return logit(a) > logit(b) || (logit(a) == logit(b) && a < b); };
  auto mask_from = [&](size_t first) {
    for (size_t i = first; i < order.size(); ++i) logits[static_cast<size_t>(order[i])] = kNegInf;
    order.resize(first);
  };
  order.clear();
  for (size_t i = 0; i < vocab; ++i) {
    if (logits[i] != kNegInf) order.push_back(static_cast<int32_t>(i));
  }
  if (use_top_k && static_cast<size_t>(p.top_k) < order.size()) {
    const auto kth_it = order.begin() + (p.top_k - 1);
    std::nth_element(order.begin(), kth_it, order.end(), better);
    const float kth = logit(*kth_it);
    // Ties with the k-th logit stay.
    const auto end = std::partition(order.begin(), order.end(), [&](int32_t id) { return logit(id) >= kth; });
    mask_from(static_cast<size_t>(end - order.begin()));
  }
  if (p.top_p < 1.0f && order.size() > 1) {
    // Drop the least likely tokens while their total probability stays
    // <= 1 - top_p: keep the shortest most-likely prefix whose tail is that
    // small. The prefix is sorted in growing pieces; the nucleus is usually small.
    double z = 0.0;
    for (int32_t id : order) z += std::exp(static_cast<double>(logit(id) - max_logit));
    const double limit = (1.0 - static_cast<double>(p.top_p)) * z;
    size_t sorted = 0, keep = order.size();
    double prefix = 0.0;
    for (size_t piece = 64; keep == order.size() && sorted < order.size(); piece *= 4) {
      const size_t upto = std::min(order.size(), sorted + piece);
      std::partial_sort(order.begin() + static_cast<std::ptrdiff_t>(sorted),
                        order.begin() + static_cast<std::ptrdiff_t>(upto), order.end(), better);
      for (size_t i = sorted; i < upto; ++i) {
        prefix += std::exp(static_cast<double>(logit(order[i]) - max_logit));
        if (z - prefix <= limit) {
          keep = i + 1;
          break;
        }
      }
      sorted = upto;
    }
    mask_from(keep);
  }
}

void apply_token_bitmask(std::span<float> logits, std::span<const uint32_t> allowed) {
  HYLLM_CHECK(allowed.size() * 32 >= logits.size(), "token bitmask of {} words for {} logits", allowed.size(),
              logits.size());
  for (size_t w = 0; w * 32 < logits.size(); ++w) {
    const uint32_t bits = allowed[w];
    if (bits == 0xffffffffu) continue;
    const size_t end = std::min(logits.size(), w * 32 + 32);
    for (size_t i = w * 32; i < end; ++i) {
      if (!((bits >> (i - w * 32)) & 1u)) logits[i] = kNegInf;
    }
  }
}

SampledToken Sampler::sample(std::span<const float> logits, const SeqWork& work, std::span<const uint32_t> allowed) {
  HYLLM_CHECK(work.sampling != nullptr, "sample without sampling params (seq {})", work.seq_id);
  HYLLM_CHECK(!logits.empty(), "empty logits row");
  const SamplingParams& p = *work.sampling;
  const size_t vocab = logits.size();
  SampledToken result;

  // 0. The structured-output mask, on a copy.
  work_logits_.assign(logits.begin(), logits.end());
  if (!allowed.empty()) apply_token_bitmask(work_logits_, allowed);

  // 1. Raw logprobs, before anything else changes the logits.
  const int num_top = p.logprobs.value_or(-1);
  if (num_top >= 0) log_softmax(work_logits_, probs_);

  // 2-3. Bans and penalties.
  apply_bans_and_penalties(work_logits_, work, order_);

  if (p.temperature < kGreedyTemperature) {
    // 4. Greedy.
    result.token = argmax(work_logits_);
    if (!allowed.empty() && work_logits_[static_cast<size_t>(result.token)] == kNegInf) return SampledToken{};
  } else {
    // 5. Temperature and the masks.
    apply_temperature_and_masks(work_logits_, p, order_);
    const float max_logit = *std::max_element(work_logits_.begin(), work_logits_.end());
    if (!(max_logit > kNegInf)) return SampledToken{};
    // 6. Inverse CDF in id order with one counter-based uniform.
    weights_.resize(vocab);
    double z = 0.0;
    for (size_t i = 0; i < vocab; ++i) {
      const float v = work_logits_[i];
      weights_[i] = v == kNegInf ? 0.0 : std::exp(static_cast<double>(v - max_logit));
      z += weights_[i];
    }
    const double target = sampler_uniform(work.seed, work.sample_index) * z;
    double acc = 0.0;
    int32_t chosen = -1;
    int32_t last_kept = -1;
    for (size_t i = 0; i < vocab; ++i) {
      if (weights_[i] == 0.0) continue;
      last_kept = static_cast<int32_t>(i);
      acc += weights_[i];
      if (acc > target) {
        chosen = static_cast<int32_t>(i);
        break;
      }
    }
    result.token = chosen >= 0 ? chosen : last_kept;  // rounding can leave target == z
  }

  if (num_top >= 0) {
    result.logprob = static_cast<float>(probs_[static_cast<size_t>(result.token)]);
    result.top_logprobs = most_likely(probs_, num_top, order_);
  }
  return result;
}

}  // namespace hyllm
