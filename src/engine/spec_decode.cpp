#include "engine/spec_decode.h"

#include "util/status.h"

namespace hyllm {

int count_accepted_drafts(std::span<const int32_t> drafts, std::span<const int32_t> targets) {
  HYLLM_CHECK(targets.size() == drafts.size() + 1, "{} target samples for {} drafts", targets.size(), drafts.size());
  size_t a = 0;
  while (a < drafts.size() && drafts[a] == targets[a]) ++a;
  return static_cast<int>(a);
}

}  // namespace hyllm
