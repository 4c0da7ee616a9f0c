#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/status.h"

namespace hyllm {

void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float v : logits) max_logit = std::max(max_logit, static_cast<double>(v));
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max_logit);
  const double log_z = max_logit + std::log(sum);
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
}

std::vector<std::pair<int32_t, float>> most_likely(std::span<const double> logprobs, int k,
                                                   std::vector<int32_t>& order) {
  const size_t n = std::min(static_cast<size_t>(std::max(k, 0)), logprobs.size());
  std::vector<std::pair<int32_t, float>> top;
  if (n == 0) return top;
  order.resize(logprobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](int32_t a, int32_t b) {
                      const double va = logprobs[static_cast<size_t>(a)], vb = logprobs[static_cast<size_t>(b)];
                      return va > vb || (va == vb && a < b);
                    });
  top.reserve(n);
  for (size_t i = 0; i < n; ++i) top.emplace_back(order[i], static_cast<float>(logprobs[static_cast<size_t>(order[i])]));
  return top;
}

TokenLogprob score_token(std::span<const float> logits, int32_t token, int num_top, std::vector<double>& logprobs,
                         std::vector<int32_t>& order) {
  HYLLM_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "scored token {} outside a vocabulary of {}",
              token, logits.size());
  log_softmax(logits, logprobs);
  const float own = logits[static_cast<size_t>(token)];
  TokenLogprob t;
  t.token = token;
  t.logprob = static_cast<float>(logprobs[static_cast<size_t>(token)]);
  t.rank = 1 + static_cast<int32_t>(std::count_if(logits.begin(), logits.end(), [own](float v) { return v > own; }));
  t.top_logprobs = most_likely(logprobs, num_top, order);
  return t;
}

}  // namespace hyllm
