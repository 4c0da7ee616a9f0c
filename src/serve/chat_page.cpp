#include "serve/chat_page.h"

#include <openssl/evp.h>

#include <array>
#include <cstddef>

#include "util/status.h"

namespace hyllm::serve {

// Generated at build time from chat_page.html (src/CMakeLists.txt).
extern const unsigned char kChatPageHtml[];
extern const std::size_t kChatPageHtml_size;

namespace {

// The text of the one <tag>...</tag> element of the page (script or style).
std::string_view element_text(std::string_view page, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const size_t start = page.find(open);
  const size_t end = page.find(close);
  HYLLM_CHECK(start != std::string_view::npos && end != std::string_view::npos && start < end &&
                  page.find(open, start + 1) == std::string_view::npos,
              "the chat page must have exactly one <{}> element", tag);
  return page.substr(start + open.size(), end - start - open.size());
}

}  // namespace

std::string_view chat_page_html() {
  return std::string_view(reinterpret_cast<const char*>(kChatPageHtml), kChatPageHtml_size);
}

std::string csp_hash_source(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  HYLLM_CHECK(EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr) == 1,
              "SHA-256 failed");
  std::array<unsigned char, 4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1> base64{};
  const int written = EVP_EncodeBlock(base64.data(), digest.data(), static_cast<int>(length));
  return "'sha256-" + std::string(reinterpret_cast<const char*>(base64.data()), static_cast<size_t>(written)) + "'";
}

const std::string& chat_page_security_policy() {
  static const std::string policy = [] {
    const std::string_view page = chat_page_html();
    return "default-src 'none'; script-src " + csp_hash_source(element_text(page, "script")) + "; style-src " +
           csp_hash_source(element_text(page, "style")) +
           "; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
  }();
  return policy;
}

void write_chat_page(httplib::Response& res) {
  res.status = 200;
  res.set_header("Content-Security-Policy", chat_page_security_policy());
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");
  res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
}

}  // namespace hyllm::serve
