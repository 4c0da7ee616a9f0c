#include "serve/http_server.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>

#include "serve/api_error.h"
#include "serve/connection_stream.h"
#include "serve/connection_threads.h"
#include "util/log.h"

namespace hyllm::serve {
namespace {

thread_local ConnectionContext* tls_connection = nullptr;

// Closing a socket that still holds unread request bytes makes the kernel
// send a reset, which can destroy the response in flight (a 413 for a body
// that was not read, say). Send FIN first, then read and drop what the client
// still sends, for a bounded time, before closing.
void close_gracefully(int fd) {
  ::shutdown(fd, SHUT_WR);
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::seconds(1);
  char buf[16384];
  size_t drained = 0;
  while (drained < (64u << 20)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  ::close(fd);
}

// 431 in the OpenAI error shape, written straight to the stream.
void refuse_head(ConnectionStream& stream) {
  const std::string body = ApiError(431, "Request header fields too large").body();
  const std::string response = fmt::format(
      "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\n\r\n{}",
      body.size(), body);
  stream.write(response.data(), response.size());
}

}  // namespace

ConnectionContext* ConnectionContext::current() { return tls_connection; }

bool ConnectionContext::peer_alive() const { return fd_ >= 0 && socket_peer_alive(fd_); }

HttpServer::HttpServer(HttpLimits limits) : limits_(limits) {
  new_task_queue = [this] { return new ConnectionThreads(limits_.max_connection_threads); };
  set_keep_alive_timeout(limits_.keep_alive_timeout_s);
  set_keep_alive_max_count(limits_.keep_alive_max_requests);
  set_read_timeout(limits_.read_timeout_s, 0);
  set_write_timeout(limits_.write_timeout_s, 0);
  set_payload_max_length(limits_.max_raw_body_bytes);
  // SO_REUSEADDR alone: the library's default sets SO_REUSEPORT, with which
  // a second server binds a port that one already serves and the kernel
  // splits the clients between the two. A taken port is an error, as in vLLM.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

HttpServer::~HttpServer() = default;

int HttpServer::bind(const std::string& host, int port) {
  int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  if (bound < 0) return -1;
  // Linux accepts a second listen() on a listening socket and takes its
  // backlog: the library's compiled-in backlog of 5 drops bursts of clients.
  socket_t fd = svr_sock_;
  if (::listen(fd, limits_.listen_backlog) != 0) {
    log::warn("could not widen the listen backlog: {}", std::strerror(errno));
  }
  return bound;
}

bool HttpServer::serve() { return listen_after_bind(); }

void HttpServer::stop_listening() {
  stop();
  // Whoever swaps the socket out closes it: here when stop() did not.
  const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
  if (sock != INVALID_SOCKET) {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
}

bool HttpServer::wait_for_next_request(int fd, const ConnectionStream& stream) const {
  if (stream.has_buffered_bytes()) return true;
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::seconds(limits_.keep_alive_timeout_s);
  // Short slices so that an idle connection notices the server stopping.
  while (svr_sock_ != INVALID_SOCKET) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, 100);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
    if (clock::now() >= deadline) return false;
  }
  return false;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  open_connections_.fetch_add(1, std::memory_order_relaxed);
  // Each SSE event must leave at once, not wait behind Nagle's algorithm.
  int one = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  ConnectionContext context;
  context.fd_ = sock;
  tls_connection = &context;
  ConnectionStream stream(sock, context, limits_);
  bool ret = false;
  try {
    for (size_t left = limits_.keep_alive_max_requests; left > 0; --left) {
      if (!wait_for_next_request(sock, stream)) break;
      stream.begin_request();
      context.close_after_response_ = false;
      context.head_too_large_ = false;
      bool connection_closed = false;
      ret = process_request(stream, left == 1, connection_closed, nullptr);
      // A request line past the head's cap ends the library's parse before
      // any handler runs, and it would close without a word.
      if (!ret && context.head_too_large_ && !stream.responded()) refuse_head(stream);
      if (!ret || connection_closed || context.closing()) break;
    }
  } catch (const std::exception& e) {
    log::error("connection: {}", e.what());
  } catch (...) {
    log::error("connection: unknown exception");
  }
  tls_connection = nullptr;
  close_gracefully(sock);
  open_connections_.fetch_sub(1, std::memory_order_relaxed);
  return ret;
}

}  // namespace hyllm::serve
