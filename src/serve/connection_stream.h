#pragma once
// The byte stream httplib reads requests from and writes responses to, for
// one accepted socket. It enforces the request caps as bytes are consumed:
// the head (request line + headers) may not exceed max_head_bytes or
// max_header_count lines, the body may not exceed max_raw_body_bytes; past a
// cap, reads fail and httplib answers 400 (turned into 431/413 by the router).

#include <httplib.h>

#include <array>
#include <cstddef>

namespace hyllm::serve {

class ConnectionContext;
struct HttpLimits;

class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int fd, ConnectionContext& context, const HttpLimits& limits);

  // Starts counting a new request's head.
  void begin_request();
  bool has_buffered_bytes() const { return pos_ < len_; }
  // Whether anything of a response to the current request was sent.
  bool responded() const { return sent_ > 0; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  // Counts consumed bytes against the caps; false when a cap is exceeded.
  bool account(const char* data, size_t n);

  int fd_;
  ConnectionContext& context_;
  const HttpLimits& limits_;
  std::array<char, 16384> buf_{};
  size_t pos_ = 0;
  size_t len_ = 0;
  bool in_head_ = true;
  size_t head_bytes_ = 0;
  size_t head_lines_ = 0;
  unsigned tail_ = 0;  // last bytes of the head, to find the blank line
  size_t body_bytes_ = 0;
  size_t sent_ = 0;  // response bytes of the current request
};

// True when fd is still connected: no hang-up, error or orderly close seen.
bool socket_peer_alive(int fd);
// Waits up to timeout_ms for fd to become writable; false on timeout or when
// the peer is gone.
bool wait_writable(int fd, int timeout_ms);

}  // namespace hyllm::serve
