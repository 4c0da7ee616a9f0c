#pragma once
// Fast non-cryptographic hashing (xxHash3). Prefix-cache block hashes that
// must resist collisions use a keyed construction on top; see engine/kv.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hyllm {

uint64_t hash64(const void* data, size_t size, uint64_t seed = 0);
inline uint64_t hash64(std::string_view s, uint64_t seed = 0) { return hash64(s.data(), s.size(), seed); }

}  // namespace hyllm
