#pragma once
// Summary statistics with numpy's definitions, so numbers match what
// `vllm bench serve` prints for the same samples: population standard
// deviation (ddof=0) and linear-interpolation percentiles. An empty sample
// gives 0, as numpy does for `np.mean(x or 0)`.

#include <vector>

namespace hyllm::bench {

double mean(const std::vector<double>& x);
double stddev(const std::vector<double>& x);
double median(const std::vector<double>& x);
// p in [0, 100].
double percentile(const std::vector<double>& x, double p);

}  // namespace hyllm::bench
