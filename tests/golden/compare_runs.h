#pragma once
// One model configuration against another on the same prompt: teacher-forced
// on the reference's greedy tokens (every step's logits compared), and the
// tested configuration's own greedy tokens against the reference's. Greedy
// tokens must be equal at every step until one whose reference margin is
// below twice that step's logit difference, where a flip is legitimate (the
// runs diverge after it); a flip at a larger margin is a mismatch.

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness.h"

namespace hyllm::testing {

struct RunComparison {
  double err2 = 0, ref2 = 0;  // sums of squared logit error and squared reference logits
  float max_abs = 0;          // largest |logit error|
  int steps = 0;              // teacher-forced steps
  int agreed = 0;             // leading greedy tokens equal to the reference's
  int mismatches = 0;         // greedy flips at a margin above twice the logit difference
  double rel_rms() const { return ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0; }
  void add(const RunComparison& o) {
    err2 += o.err2;
    ref2 += o.ref2;
    max_abs = std::max(max_abs, o.max_abs);
    steps += o.steps;
    agreed += o.agreed;
    mismatches += o.mismatches;
  }
};

inline RunComparison compare_runs(Harness& ref, Harness& test, const std::vector<int32_t>& prompt, int steps) {
  RunComparison c;
  const SeqResult r = ref.run({SeqRun{prompt, steps, {}, {}}})[0];
  const SeqResult forced = test.run({SeqRun{prompt, steps, {}, r.tokens}})[0];
  std::vector<float> step_diff(static_cast<size_t>(steps), 0.0f);
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < r.logits[s].size(); ++i) {
      const double d = forced.logits[s][i] - r.logits[s][i];
      c.err2 += d * d;
      c.ref2 += static_cast<double>(r.logits[s][i]) * r.logits[s][i];
      step_diff[s] = std::max(step_diff[s], static_cast<float>(std::fabs(d)));
    }
    c.max_abs = std::max(c.max_abs, step_diff[s]);
  }
  c.steps = steps;
  const SeqResult free = test.run({SeqRun{prompt, steps, {}, {}}})[0];
  while (c.agreed < steps && free.tokens[c.agreed] == r.tokens[c.agreed]) ++c.agreed;
  if (c.agreed < steps && top_margin(r.logits[c.agreed]) >= 2 * step_diff[c.agreed]) ++c.mismatches;
  return c;
}

}  // namespace hyllm::testing
