#include <gtest/gtest.h>

#include <string>

#include "serve/chat_page.h"

namespace hyllm::serve {
namespace {

size_t count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ChatPage, IsOneSelfContainedFile) {
  const std::string_view page = chat_page_html();
  EXPECT_EQ(page.substr(0, 15), "<!doctype html>");
  EXPECT_EQ(count(page, "<script>"), 1u);
  EXPECT_EQ(count(page, "<style>"), 1u);
  // Nothing is fetched from elsewhere: no absolute URLs, no external files.
  EXPECT_EQ(count(page, "http:"), 0u);
  EXPECT_EQ(count(page, "https:"), 0u);
  EXPECT_EQ(count(page, " src="), 0u);
  EXPECT_EQ(count(page, "@import"), 0u);
  // It talks to the server's own API only.
  EXPECT_GT(count(page, "'/v1/chat/completions'"), 0u);
  EXPECT_GT(count(page, "'/v1/models'"), 0u);
}

TEST(ChatPage, HashSourcesAreBase64Sha256) {
  // SHA-256 of the empty string.
  EXPECT_EQ(csp_hash_source(""), "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='");
  EXPECT_EQ(csp_hash_source("abc"), "'sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0='");
}

TEST(ChatPage, PolicyAllowsOnlyThePagesOwnCode) {
  const std::string& policy = chat_page_security_policy();
  EXPECT_EQ(policy.find("unsafe"), std::string::npos) << policy;
  EXPECT_EQ(policy.rfind("default-src 'none';", 0), 0u) << policy;
  EXPECT_NE(policy.find("script-src 'sha256-"), std::string::npos) << policy;
  EXPECT_NE(policy.find("style-src 'sha256-"), std::string::npos) << policy;
  EXPECT_NE(policy.find("connect-src 'self'"), std::string::npos) << policy;
  EXPECT_NE(policy.find("frame-ancestors 'none'"), std::string::npos) << policy;
}

TEST(ChatPage, IsServedAsHtmlWithItsPolicy) {
  httplib::Response res;
  write_chat_page(res);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(res.get_header_value("Content-Security-Policy"), chat_page_security_policy());
  EXPECT_EQ(res.get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(res.body, std::string(chat_page_html()));
}

}  // namespace
}  // namespace hyllm::serve
