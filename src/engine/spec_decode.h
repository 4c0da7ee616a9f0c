#pragma once
// Acceptance of speculative drafts (executor.h explains why it is exact).
// The MTP head drafts greedily, so each draft is a point mass q = 1{d}.
// Rejection sampling accepts d with probability min(1, p(d) / q(d)) = p(d)
// and on rejection samples from the residual max(p - q, 0), which is p with
// d removed and renormalised. Sampling x ~ p and accepting iff x == d has
// the same law: P(accept) = p(d), and a rejected x is p conditioned on x != d.
// So the target samples every verify row as an ordinary decode step would
// (same logits, context, seed and counter: the same token), and the drafts
// are accepted while they match.

#include <cstdint>
#include <span>

namespace hyllm {

// The number of leading drafts equal to the target's samples at their
// positions: targets[j] is the target's token after the first j drafts
// (targets.size() == drafts.size() + 1). The step emits targets[0 .. a].
int count_accepted_drafts(std::span<const int32_t> drafts, std::span<const int32_t> targets);

}  // namespace hyllm
