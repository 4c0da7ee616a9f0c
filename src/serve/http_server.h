#pragma once
// The HTTP listener: cpp-httplib's router and response writer, with our own
// connection handling around it. httplib 0.11 reads request heads and bodies
// without bounds, polls idle keep-alive sockets in a busy loop, listens with a
// backlog of 5 and runs a fixed pool of threads; this class replaces those
// parts:
//  - every connection reads through a ConnectionStream that caps the request
//    head (bytes and header count) and the raw body bytes;
//  - connection threads grow on demand up to a cap (each streaming client
//    holds one thread for the life of its response);
//  - the listen backlog is widened after bind;
//  - a handler can ask whether its client is still connected
//    (ConnectionContext::current()), which is how a disconnect aborts a
//    request while it waits for tokens.

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <string>

#include "serve/limits.h"

namespace hyllm::serve {

struct HttpLimits {
  size_t max_head_bytes = kMaxRequestHeadBytes;
  size_t max_header_count = kMaxHeaderCount;
  // Raw bytes after the head; a little above the JSON cap for chunk framing.
  size_t max_raw_body_bytes = kMaxRequestBodyBytes + (1u << 20);
  size_t max_connection_threads = 4096;
  int listen_backlog = 4096;
  int keep_alive_timeout_s = 30;
  size_t keep_alive_max_requests = 100000;
  int read_timeout_s = 30;
  // A client that accepts no bytes for this long is treated as gone.
  int write_timeout_s = 60;
};

// The connection a handler runs on; valid only on that handler's thread.
class ConnectionContext {
 public:
  // nullptr outside a connection thread (for example in unit tests).
  static ConnectionContext* current();

  // False once the client has closed or reset the connection. Cheap: one
  // non-blocking poll and peek.
  bool peer_alive() const;
  // The connection is closed after this response (used when a body was left
  // unread, so the next bytes cannot be mistaken for a request).
  void close_after_response() { close_after_response_ = true; }
  bool closing() const { return close_after_response_; }
  // Set when the request head went over the caps.
  bool head_too_large() const { return head_too_large_; }

 private:
  friend class HttpServer;
  friend class ConnectionStream;
  int fd_ = -1;
  bool close_after_response_ = false;
  bool head_too_large_ = false;
};

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(HttpLimits limits = {});
  ~HttpServer() override;

  // Binds (port 0 picks a free port) and widens the backlog. Returns the
  // bound port, or -1 when the address cannot be bound.
  int bind(const std::string& host, int port);
  // Accepts connections until stop_listening(); returns false when accepting failed.
  bool serve();
  // Stops serve() wherever it is: also before it reached accept(), where
  // httplib's stop() does nothing (it acts only once the listener runs) and
  // serve() would then wait for a connection forever.
  void stop_listening();

  const HttpLimits& limits() const { return limits_; }
  size_t open_connections() const { return open_connections_.load(std::memory_order_relaxed); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool wait_for_next_request(int fd, const class ConnectionStream& stream) const;

  HttpLimits limits_;
  std::atomic<size_t> open_connections_{0};
};

}  // namespace hyllm::serve
