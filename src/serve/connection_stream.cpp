#include "serve/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "serve/http_server.h"

namespace hyllm::serve {
namespace {

void sockaddr_to_ip_port(const sockaddr_storage& addr, std::string& ip, int& port) {
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  ip = host;
}

}  // namespace

bool socket_peer_alive(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  int r = ::poll(&p, 1, 0);
  if (r < 0) return errno == EINTR;
  if (r == 0) return true;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
  // Readable: either the next pipelined request (alive) or an orderly close.
  char c;
  ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;
  if (n == 0) return false;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

bool wait_writable(int fd, int timeout_ms) {
  pollfd p{fd, POLLOUT | POLLRDHUP, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
  return (p.revents & POLLOUT) != 0;
}

ConnectionStream::ConnectionStream(int fd, ConnectionContext& context, const HttpLimits& limits)
    : fd_(fd), context_(context), limits_(limits) {}

void ConnectionStream::begin_request() {
  in_head_ = true;
  head_bytes_ = 0;
  head_lines_ = 0;
  tail_ = 0;
  body_bytes_ = 0;
  sent_ = 0;
}

bool ConnectionStream::is_readable() const {
  if (has_buffered_bytes()) return true;
  pollfd p{fd_, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, limits_.read_timeout_s * 1000);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

bool ConnectionStream::is_writable() const {
  return wait_writable(fd_, limits_.write_timeout_s * 1000);
}

bool ConnectionStream::account(const char* data, size_t n) {
  size_t i = 0;
  for (; in_head_ && i < n; ++i) {
    char c = data[i];
    ++head_bytes_;
    tail_ = (tail_ << 8) | static_cast<unsigned char>(c);
    if (c == '\n') ++head_lines_;
    if (tail_ == 0x0d0a0d0au) in_head_ = false;  // "\r\n\r\n": the blank line
    // Lines: the request line, the headers, the blank line.
    if (head_bytes_ > limits_.max_head_bytes || head_lines_ > limits_.max_header_count + 2) {
      context_.head_too_large_ = true;
      return false;
    }
  }
  body_bytes_ += n - i;
  return body_bytes_ <= limits_.max_raw_body_bytes;
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (!has_buffered_bytes()) {
    if (!is_readable()) return -1;
    ssize_t r;
    do {
      r = ::recv(fd_, buf_.data(), buf_.size(), 0);
    } while (r < 0 && errno == EINTR);
    if (r <= 0) return r;
    pos_ = 0;
    len_ = static_cast<size_t>(r);
  }
  size_t n = std::min(size, len_ - pos_);
  std::memcpy(ptr, buf_.data() + pos_, n);
  pos_ += n;
  if (!account(ptr, n)) return -1;
  return static_cast<ssize_t>(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  ssize_t r;
  do {
    r = ::send(fd_, ptr, size, MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r > 0) sent_ += static_cast<size_t>(r);
  return r;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) sockaddr_to_ip_port(addr, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) sockaddr_to_ip_port(addr, ip, port);
}

}  // namespace hyllm::serve
