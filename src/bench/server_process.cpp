#include "bench/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/endpoint_client.h"
#include "util/status.h"

namespace hyllm::bench {

int find_free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail(ErrorCode::kIo, "socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    fail(ErrorCode::kIo, "cannot find a free port");
  }
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

ServerProcess::ServerProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                             const std::filesystem::path& log_path)
    : log_path_(log_path) {
  if (argv.empty()) fail(ErrorCode::kInvalidArgument, "empty launch command");
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log_fd < 0) fail(ErrorCode::kIo, "cannot create log {}", log_path.string());
  launch_time_ = now_s();
  pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    fail(ErrorCode::kIo, "fork failed");
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    dprintf(STDERR_FILENO, "exec %s failed: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(log_fd);
  setpgid(pid, pid);
  pid_ = pid;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) stop(5.0);
}

bool ServerProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = status;
    pid_ = -1;
    return false;
  }
  return true;
}

std::string ServerProcess::log_text() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ServerProcess::wait_until_healthy(const std::string& base_url, double timeout_s) {
  ParsedUrl url = parse_base_url(base_url);
  const double deadline = now_s() + timeout_s;
  while (true) {
    if (!running()) {
      std::string log = log_text();
      fail(ErrorCode::kUnavailable, "server exited during startup (status {}); log tail:\n{}", exit_status_,
           log.size() > 3000 ? log.substr(log.size() - 3000) : log);
    }
    httplib::Client c(url.scheme_host_port);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(5, 0);
    if (auto res = c.Get((url.path_prefix + "/health").c_str()); res && res->status == 200) return;
    if (now_s() > deadline) fail(ErrorCode::kUnavailable, "server not healthy after {:.0f} s", timeout_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

int ServerProcess::stop(double grace_s) {
  if (pid_ <= 0) return exit_status_;
  kill(-pid_, SIGTERM);
  const double deadline = now_s() + grace_s;
  while (running() && now_s() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    exit_status_ = status;
    pid_ = -1;
  }
  return exit_status_;
}

}  // namespace hyllm::bench
