#pragma once
// Thread-local scratch vectors keep their capacity between calls, which saves
// an allocation per call. A server tokenizes on many long-lived connection
// threads, so a vector grown by one huge input (a prompt of a megabyte) would
// stay that large on its thread for good: past a bound it is freed instead.

#include <cstddef>
#include <vector>

namespace hyllm::tokenizer_detail {

inline constexpr size_t kMaxKeptScratchBytes = size_t{256} << 10;

template <class T>
void release_if_oversized(std::vector<T>& v) {
  if (v.capacity() * sizeof(T) > kMaxKeptScratchBytes) std::vector<T>().swap(v);
}

}  // namespace hyllm::tokenizer_detail
