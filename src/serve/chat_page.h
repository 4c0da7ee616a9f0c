#pragma once
// GET /: a small chat page, compiled into the binary from
// src/serve/chat_page.html (cmake/embed_file.cmake), so that it works offline
// and nothing is read from disk at run time. The page talks to the server only
// through its own OpenAI routes (/v1/models, /v1/chat/completions), carrying
// the API key the user types in; the page itself holds no secret and is public.

#include <httplib.h>

#include <string>
#include <string_view>

namespace hyllm::serve {

std::string_view chat_page_html();

// The Content-Security-Policy the page is served with: its own inline script
// and style only (by SHA-256), connections to this origin only, no framing.
const std::string& chat_page_security_policy();

// "'sha256-<base64>'", a CSP source expression for an inline element's text.
std::string csp_hash_source(std::string_view text);

void write_chat_page(httplib::Response& res);

}  // namespace hyllm::serve
