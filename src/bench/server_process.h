#pragma once
// A server under test, launched as a child process in its own process group
// with its output captured to a log file, stopped with SIGTERM (then SIGKILL).

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace hyllm::bench {

class ServerProcess {
 public:
  ServerProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                const std::filesystem::path& log_path);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Polls GET base_url/health until it answers 200; throws hyllm::Error
  // (kUnavailable) with the log's tail when the process exits or time runs out.
  void wait_until_healthy(const std::string& base_url, double timeout_s);
  bool running();
  // SIGTERM to the group, SIGKILL after `grace_s`; returns the exit status.
  int stop(double grace_s = 30.0);
  std::string log_text() const;
  double launch_time() const { return launch_time_; }

 private:
  int pid_ = -1;
  int exit_status_ = -1;
  std::filesystem::path log_path_;
  double launch_time_ = 0;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int find_free_port();

}  // namespace hyllm::bench
