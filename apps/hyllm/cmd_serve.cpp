// hyllm serve [MODEL_DIR]: the OpenAI-compatible server, with vLLM's flags.
// It binds first and answers /health with 503 while the model loads, then
// serves; SIGTERM (or Ctrl-C) stops new work, drains in-flight requests within
// --shutdown-timeout, and exits. A second signal exits at once.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "command.h"
#include "serve/openai_server.h"
#include "serve_args.h"
#include "serving_setup.h"
#include "util/env.h"
#include "util/log.h"
#include "util/malloc_config.h"
#include "util/status.h"
#include "util/version.h"

namespace hyllm::app {
namespace {

using Clock = std::chrono::steady_clock;

// Set by the signal thread, read by the main thread (static: the detached
// signal thread may outlive run_serve's frame).
struct ShutdownSignal {
  std::mutex mu;
  std::condition_variable cv;
  bool requested = false;
};
ShutdownSignal& shutdown_signal() {
  static ShutdownSignal s;
  return s;
}

// The signal handler only writes the signal number to a pipe (async-signal
// safe, whichever thread the kernel picks); a thread reads the pipe and acts.
int g_signal_pipe[2] = {-1, -1};

extern "C" void forward_signal(int sig) {
  const char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &c, 1);
}

void start_signal_thread() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) fail(ErrorCode::kIo, "cannot create the signal pipe");
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  std::thread([] {
    for (int count = 0;; ++count) {
      char c = 0;
      ssize_t n = ::read(g_signal_pipe[0], &c, 1);
      if (n < 0 && errno == EINTR) {
        --count;
        continue;
      }
      if (n <= 0) return;
      const char* name = c == SIGINT ? "SIGINT" : "SIGTERM";
      if (count > 0) {
        log::warn("Received {} again: exiting now", name);
        std::_Exit(1);
      }
      log::info("Received {}: shutting down", name);
      auto& s = shutdown_signal();
      {
        std::lock_guard lock(s.mu);
        s.requested = true;
      }
      s.cv.notify_all();
    }
  }).detach();
}

void wait_for_shutdown() {
  auto& s = shutdown_signal();
  std::unique_lock lock(s.mu);
  s.cv.wait(lock, [&] { return s.requested; });
}

int run_serve(ServeArgs& a) {
  tune_malloc_for_serving();
  start_signal_thread();
  if (!a.uvicorn_log_level.empty() && a.uvicorn_log_level != "info") {
    spdlog::set_level(spdlog::level::from_str(a.uvicorn_log_level == "warning" ? "warn" : a.uvicorn_log_level));
  }
  log::info("hyllm API server version {}", kVersion);
  log_non_default_args(a);
  // Cheap checks first: the flags, the config file.
  ServingPlan plan = plan_serving(a);

  // Listen now, so that probes see 503 (not a refused connection) while loading.
  std::vector<std::string> api_keys = a.api_key;
  if (api_keys.empty() && env().api_key) api_keys.push_back(*env().api_key);
  // Declared before the server: the engine inside it frees device memory
  // through the backend, so the backend must outlive it.
  std::vector<std::unique_ptr<Backend>> backends;
  serve::ServerOptions server_options;
  server_options.host = a.host;
  server_options.port = a.port;
  server_options.api_keys = api_keys;
  server_options.access_log = !a.disable_uvicorn_access_log;
  server_options.unlogged_paths = a.disable_access_log_for_endpoints;
  serve::OpenAIServer server(server_options);
  const int port = server.start();
  log::info("Started server process [{}]; listening on http://{}:{} (the model is loading)", getpid(), a.host, port);
  if (!api_keys.empty()) {
    log::info("API key required on every route but /health, /version, /metrics and the chat page at /");
  }

  const auto t_load = Clock::now();
  std::unique_ptr<serve::ServingContext> ctx = load_serving_context(a, plan, backends);
  const std::string served = ctx->model_name();
  server.set_ready(std::move(ctx));

  log::info("Available routes are:");
  for (const auto& r : server.route_list()) log::info("{}", r);
  log::info("Serving model '{}' on http://{}:{}", served, a.host, port);
  log::info("Application startup complete. (init took {:.2f} seconds)",
            std::chrono::duration<double>(Clock::now() - t_load).count());

  wait_for_shutdown();
  server.drain(std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout * 1000)));
  server.wait();
  return 0;
}

void setup_serve(CLI::App& sub, int& exit_code) {
  auto args = std::make_shared<ServeArgs>();
  add_serve_flags(sub, *args);
  sub.callback([args, &exit_code, &sub] {
    apply_config_file(sub, args->config_file);
    record_non_default(sub, *args);
    exit_code = run_serve(*args);
  });
}

const CommandRegistration kRegistration{"serve", "Start the OpenAI-compatible server (vLLM's flags)", setup_serve};

}  // namespace
}  // namespace hyllm::app
