#pragma once
// API-key checks. Keys are kept only as SHA-256 digests and a presented key is
// hashed and compared with every stored digest in constant time, so neither
// the content nor the length of a key leaks through timing. Authorisation is
// decided on the path the router matches (never on a URL rebuilt from Host),
// and everything outside a short public list needs a key.

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace hyllm::serve {

class ApiKeyAuth {
 public:
  ApiKeyAuth() = default;
  explicit ApiKeyAuth(const std::vector<std::string>& keys);

  bool enabled() const { return !digests_.empty(); }
  // True when the request may go on: auth disabled, a public path, or a valid
  // "Authorization: Bearer <key>" header.
  bool authorize(std::string_view routed_path, std::string_view authorization_header) const;
  // Constant-time check of a bare key against every configured key.
  bool key_matches(std::string_view key) const;

  // /health, /version and /metrics: probes and scrapers carry no key. / is
  // the chat page: static, it holds no secret and asks the user for the key.
  static bool is_public_path(std::string_view path);

 private:
  using Digest = std::array<unsigned char, 32>;
  static Digest digest(std::string_view key);
  std::vector<Digest> digests_;
};

// A Host header may carry a host name or address and a port, nothing that
// could split or redirect a URL ('/', '?', '#', '@', spaces, controls).
bool is_valid_host_header(std::string_view host);

}  // namespace hyllm::serve
