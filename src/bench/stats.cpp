#include "bench/stats.h"

#include <algorithm>
#include <cmath>

namespace hyllm::bench {

double mean(const std::vector<double>& x) {
  if (x.empty()) return 0.0;
  double s = 0.0;
  for (double v : x) s += v;
  return s / static_cast<double>(x.size());
}

double stddev(const std::vector<double>& x) {
  if (x.empty()) return 0.0;
  double m = mean(x), s = 0.0;
  for (double v : x) s += (v - m) * (v - m);
  return std::sqrt(s / static_cast<double>(x.size()));
}

double percentile(const std::vector<double>& x, double p) {
  if (x.empty()) return 0.0;
  std::vector<double> s = x;
  std::sort(s.begin(), s.end());
  double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(s.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, s.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

double median(const std::vector<double>& x) { return percentile(x, 50.0); }

}  // namespace hyllm::bench
