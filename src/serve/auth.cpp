#include "serve/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cctype>

#include "util/status.h"

namespace hyllm::serve {

ApiKeyAuth::ApiKeyAuth(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (!key.empty()) digests_.push_back(digest(key));
  }
}

ApiKeyAuth::Digest ApiKeyAuth::digest(std::string_view key) {
  Digest out{};
  unsigned int len = 0;
  if (EVP_Digest(key.data(), key.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size()) {
    fail(ErrorCode::kInternal, "SHA-256 failed");
  }
  return out;
}

bool ApiKeyAuth::key_matches(std::string_view key) const {
  const Digest presented = digest(key);
  // Compare with every key, no early exit: the time does not depend on which
  // (or whether any) key matched.
  int matched = 0;
  for (const auto& d : digests_) {
    matched |= CRYPTO_memcmp(presented.data(), d.data(), d.size()) == 0;
  }
  return matched != 0;
}

bool ApiKeyAuth::is_public_path(std::string_view path) {
  return path == "/" || path == "/health" || path == "/version" || path == "/metrics";
}

bool ApiKeyAuth::authorize(std::string_view routed_path, std::string_view header) const {
  if (!enabled() || is_public_path(routed_path)) return true;
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  }
  std::string_view key = header.substr(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  return key_matches(key);
}

bool is_valid_host_header(std::string_view host) {
  if (host.size() > 255) return false;
  for (unsigned char c : host) {
    bool ok = std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']' || c == '%';
    if (!ok) return false;
  }
  return true;
}

}  // namespace hyllm::serve
