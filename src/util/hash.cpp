#include "util/hash.h"

#include <xxhash.h>

namespace hyllm {

uint64_t hash64(const void* data, size_t size, uint64_t seed) { return XXH3_64bits_withSeed(data, size, seed); }

}  // namespace hyllm
