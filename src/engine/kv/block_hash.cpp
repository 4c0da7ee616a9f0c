#include "engine/kv/block_hash.h"

#include <openssl/evp.h>

#include "util/status.h"

namespace hyllm {

const BlockHash& root_block_hash() {
  static const BlockHash root = [] {
    BlockHash h;
    constexpr char kDomain[] = "hyllm prefix cache, token blocks, v1";
    unsigned int len = 0;
    HYLLM_CHECK(EVP_Digest(kDomain, sizeof kDomain - 1, h.bytes.data(), &len, EVP_sha256(), nullptr) == 1 &&
                    len == h.bytes.size(),
                "SHA-256 failed");
    return h;
  }();
  return root;
}

BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens) {
  // parent || count || tokens, integers little-endian.
  uint8_t buf[32 + 4 + 4 * 256];
  std::vector<uint8_t> heap;
  const size_t size = 32 + 4 + 4 * tokens.size();
  uint8_t* p = buf;
  if (size > sizeof buf) {
    heap.resize(size);
    p = heap.data();
  }
  std::memcpy(p, parent.bytes.data(), 32);
  auto put = [](uint8_t* at, uint32_t v) {
    for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
  };
  put(p + 32, static_cast<uint32_t>(tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i) put(p + 36 + 4 * i, static_cast<uint32_t>(tokens[i]));
  BlockHash h;
  unsigned int len = 0;
  HYLLM_CHECK(EVP_Digest(p, size, h.bytes.data(), &len, EVP_sha256(), nullptr) == 1 && len == h.bytes.size(),
              "SHA-256 failed");
  return h;
}

BlockHash salted_root_hash(std::string_view salt) {
  // domain || the unsalted root || the salt's bytes: a domain of its own,
  // so that no salt's root is the unsalted root or some block's hash.
  constexpr char kDomain[] = "hyllm prefix cache, salted root, v1";
  std::vector<uint8_t> buf(sizeof kDomain - 1 + 32 + salt.size());
  std::memcpy(buf.data(), kDomain, sizeof kDomain - 1);
  std::memcpy(buf.data() + sizeof kDomain - 1, root_block_hash().bytes.data(), 32);
  std::memcpy(buf.data() + sizeof kDomain - 1 + 32, salt.data(), salt.size());
  BlockHash h;
  unsigned int len = 0;
  HYLLM_CHECK(EVP_Digest(buf.data(), buf.size(), h.bytes.data(), &len, EVP_sha256(), nullptr) == 1 &&
                  len == h.bytes.size(),
              "SHA-256 failed");
  return h;
}

void extend_block_hashes(std::span<const int32_t> tokens, int block_size, int num_blocks,
                         std::vector<BlockHash>& hashes, const BlockHash& root) {
  HYLLM_CHECK(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size) <= tokens.size(),
              "{} blocks of {} tokens from {} tokens", num_blocks, block_size, tokens.size());
  const auto bs = static_cast<size_t>(block_size);
  for (size_t i = hashes.size(); i < static_cast<size_t>(num_blocks); ++i) {
    const BlockHash& parent = i == 0 ? root : hashes[i - 1];
    hashes.push_back(hash_block(parent, tokens.subspan(i * bs, bs)));
  }
}

}  // namespace hyllm
