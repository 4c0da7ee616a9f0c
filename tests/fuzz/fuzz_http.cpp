// The HTTP request path: the input is the raw bytes a client sends on one
// connection (one request, several pipelined, or garbage), to the real
// OpenAIServer on a loopback port, serving the embedded model on the CPU.
// It covers our connection handling (head and body caps, keep-alive), the
// router's checks (Host, auth, methods, media type, lengths), the handlers,
// generation and SSE streaming. An input that starts with '!' is sent and
// the connection dropped at once: a client that disconnects mid-request.
// Otherwise a last request with "Connection: close" follows the input, so
// that the server closes the connection once it has answered everything (a
// client that half-closes its socket instead is taken for gone, and gets no
// answer).
//
// Findings: a 5xx answer, a response that is not HTTP, a server that stops
// answering /health, and whatever ASan and UBSan see in the server threads.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "serve/openai_server.h"
#include "tiny_server.h"

using namespace hyllm;

namespace {

struct Server {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<serve::OpenAIServer> http;
  int port = 0;
};

Server* start_server() {
  auto* s = new Server();  // lives until the process ends; stopped at exit
  serve::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.http.read_timeout_s = 5;
  options.http.keep_alive_timeout_s = 2;
  s->http = std::make_unique<serve::OpenAIServer>(options);
  s->port = s->http->start();
  EngineConfig config = fuzz::tiny_engine_config();
  auto ctx = fuzz::tiny_serving_context();
  ctx->engine = make_engine_client(fuzz::tiny_runner(*s->backend, config), config);
  s->http->set_ready(std::move(ctx));
  return s;
}

std::string exchange(int port, std::string_view bytes, bool drop);

// The engine thread starts after set_ready(); fuzzing begins once /health says so.
void wait_healthy(int port) {
  for (int i = 0; i < 600; ++i) {
    if (exchange(port, "", false).starts_with("HTTP/1.1 200")) return;
    ::usleep(100'000);
  }
  fuzz::finding("the server did not become healthy within 60 s");
}

Server& server() {
  static Server* s = [] {
    Server* started = start_server();
    wait_healthy(started->port);
    std::atexit([] {
      server().http->drain(std::chrono::milliseconds(2000));
      server().http->wait();
    });
    return started;
  }();
  return *s;
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) fuzz::finding("cannot connect");
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

constexpr std::string_view kLastRequest = "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

// Sends the bytes (the server may stop reading early: a cap, or a close)
// and, unless `drop`, the closing request, then reads until the server closes.
std::string exchange(int port, std::string_view bytes, bool drop) {
  int fd = connect_to(port);
  std::string out(bytes);
  if (!drop) out += kLastRequest;
  size_t off = 0;
  while (off < out.size()) {
    ssize_t n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string got;
  if (!drop) {
    char buf[16384];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EAGAIN) fuzz::finding("the server did not finish its answer within 20 s");
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return got;
}

// Every status line in what came back (pipelined requests get several).
void check_statuses(const std::string& got) {
  if (!got.empty() && !got.starts_with("HTTP/1.1 ")) fuzz::finding("the answer is not HTTP");
  for (size_t p = got.find("HTTP/1.1 "); p != std::string::npos; p = got.find("HTTP/1.1 ", p + 1)) {
    if (p + 12 <= got.size() && got[p + 9] == '5' && (p == 0 || got[p - 1] == '\n')) {
      std::fprintf(stderr, "%s\n", got.substr(p, 400).c_str());
      fuzz::finding("a 5xx answer");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Server& s = server();
  std::string_view bytes = fuzz::as_text(data, size);
  const bool drop = bytes.starts_with("!");
  if (drop) bytes.remove_prefix(1);
  check_statuses(exchange(s.port, bytes, drop));
  std::string health = exchange(s.port, "", false);
  if (!health.starts_with("HTTP/1.1 200")) {
    std::fprintf(stderr, "/health answered: %s\n", health.substr(0, 300).c_str());
    fuzz::finding("the server is not healthy after this input");
  }
  return 0;
}
