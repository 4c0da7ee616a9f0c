#pragma once
// Prefix-cache keys. A block's hash covers its tokens and, through its
// parent's hash, every token before it, so one hash names a whole prefix:
//
//   hash(block i) = SHA-256(hash(block i-1) || token count || token ids)
//
// with a fixed root for block 0, or a root derived from the request's
// cache_salt (vLLM's), so that only requests with the same salt share cached
// blocks and state snapshots. SHA-256, not a fast 64-bit hash, because
// prompts are untrusted: a crafted prompt must not collide with another
// user's prefix and read its cache. The token count separates a full block
// from a partially filled one (a snapshot's tail) with the same first tokens.
// The cache also keeps each cached block's tokens and compares them on a hit,
// so a hit never rests on the hash alone.

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace hyllm {

struct BlockHash {
  std::array<uint8_t, 32> bytes{};
  bool operator==(const BlockHash&) const = default;
};

// For hash tables: the digest is uniform, so its first 8 bytes are a good key.
struct BlockHashKey {
  size_t operator()(const BlockHash& h) const {
    size_t v;
    std::memcpy(&v, h.bytes.data(), sizeof v);
    return v;
  }
};

// The parent of the first block.
const BlockHash& root_block_hash();
// The parent of the first block for requests salted with `salt` (non-empty).
BlockHash salted_root_hash(std::string_view salt);

// A sequence's chained hashes (hashes[i] names its tokens[0, (i+1) *
// block_size)) and the root they start from.
struct BlockHashChain {
  BlockHash root = root_block_hash();
  std::vector<BlockHash> hashes;
};

// The hash of a block holding `tokens` (1..block_size of them) after the prefix `parent` names.
BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens);

// Extends `hashes` (hashes[i] names tokens[0, (i+1) * block_size), from
// `root`) to cover the first `num_blocks` full blocks of `tokens`.
void extend_block_hashes(std::span<const int32_t> tokens, int block_size, int num_blocks,
                         std::vector<BlockHash>& hashes, const BlockHash& root = root_block_hash());
inline void extend_block_hashes(std::span<const int32_t> tokens, int block_size, int num_blocks,
                                BlockHashChain& chain) {
  extend_block_hashes(tokens, block_size, num_blocks, chain.hashes, chain.root);
}

}  // namespace hyllm
