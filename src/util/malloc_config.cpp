#include "util/malloc_config.h"

#include <cstdlib>  // defines __GLIBC__ on glibc
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "util/log.h"

namespace hyllm {

void tune_malloc_for_serving() {
#if defined(__GLIBC__)
  // mallopt returns 1 on success; a replaced allocator (a sanitizer's) may refuse.
  if (mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) != 1 || mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) != 1 ||
      mallopt(M_ARENA_MAX, kMaxMallocArenas) != 1) {
    log::debug("mallopt was refused; the allocator keeps its own settings");
  }
#endif
}

}  // namespace hyllm
