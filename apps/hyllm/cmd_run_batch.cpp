// hyllm run-batch -i INPUT.jsonl -o OUTPUT.jsonl [MODEL_DIR] [serve's model and engine flags]:
// vllm run-batch. Answers a file in the OpenAI Batch API format
// (serve/batch_file.h) in process, through the same endpoint handlers as
// `hyllm serve` and without an HTTP server. Every line is submitted at once
// (up to twice --max-num-seqs in flight, as vLLM) so that the engine batches
// them; answers are written in input order as they complete. `-` reads stdin
// or writes stdout (the log goes to stderr).
//
// Exits 0 once every line has its output line, whatever their statuses; 1
// when the input cannot be read, the output cannot be written, or the model
// does not load.

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "command.h"
#include "serve/api_error.h"
#include "serve/batch_file.h"
#include "serve/handlers.h"
#include "serve/response_writer.h"
#include "serve_args.h"
#include "serving_setup.h"
#include "util/log.h"
#include "util/malloc_config.h"
#include "util/status.h"
#include "util/version.h"

namespace hyllm::app {
namespace {

using Clock = std::chrono::steady_clock;

// vLLM's progress interval (its tqdm mininterval).
constexpr std::chrono::seconds kProgressInterval{5};

struct RunBatchArgs {
  ServeArgs model;
  std::string input_file;
  std::string output_file;
};

bool is_url(const std::string& path) { return path.starts_with("http://") || path.starts_with("https://"); }

std::string read_input(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(ErrorCode::kNotFound, "cannot read the input file {}: {}", path, std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(f) != 0;
  const int read_errno = errno;
  std::fclose(f);
  if (failed) fail(ErrorCode::kIo, "cannot read the input file {}: {}", path, std::strerror(read_errno));
  return text;
}

// The output file, opened (and truncated) before the model loads so that an
// unwritable path fails at once.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path) : path_(path) {
    file_ = path == "-" ? stdout : std::fopen(path.c_str(), "wb");
    if (!file_) fail(ErrorCode::kIo, "cannot write the output file {}: {}", path, std::strerror(errno));
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() {
    if (file_ && file_ != stdout) std::fclose(file_);
  }

  void write_line(const std::string& line) {
    if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fputc('\n', file_) == EOF) {
      fail(ErrorCode::kIo, "cannot write the output file {}: {}", path_, std::strerror(errno));
    }
  }

  void close() {
    const bool flushed = std::fflush(file_) == 0 && std::ferror(file_) == 0;
    const int saved_errno = errno;
    const bool closed = file_ == stdout || std::fclose(file_) == 0;
    if (file_ != stdout) file_ = nullptr;
    if (!flushed || !closed) {
      fail(ErrorCode::kIo, "cannot write the output file {}: {}", path_, std::strerror(flushed ? errno : saved_errno));
    }
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

struct Answer {
  std::string line;
  bool ok = false;  // status 200
};

// One request through its endpoint's handler, as the HTTP router calls it:
// whatever the handler throws becomes the error the router would send.
Answer answer_request(const serve::ServingContext& ctx, serve::ActivityCounter& activity,
                      const serve::BatchRequest& request) {
  httplib::Response res;
  try {
    switch (request.endpoint) {
      case serve::BatchEndpoint::kChatCompletions:
        serve::handle_chat_completions(ctx, activity, request.body, res);
        break;
      case serve::BatchEndpoint::kCompletions:
        serve::handle_completions(ctx, activity, request.body, res);
        break;
      case serve::BatchEndpoint::kResponses:
        serve::handle_responses(ctx, activity, request.body, res);
        break;
    }
    // Only a streamed answer leaves the body empty, and streamed lines are
    // refused before they get here; the check keeps every output line JSON.
    if (res.body.empty()) throw serve::ApiError(500, "the endpoint wrote no response body");
  } catch (...) {
    const serve::ApiError e = serve::api_error_from_exception(std::current_exception());
    if (e.status() >= 500) log::error("request {} failed: {}", request.custom_id, e.what());
    return {serve::batch_response_line(request.custom_id, e.status(), e.body()), false};
  }
  return {serve::batch_response_line(request.custom_id, res.status, res.body), res.status == 200};
}

Answer answer_line(const serve::ServingContext& ctx, serve::ActivityCounter& activity,
                   const serve::BatchFileLine& line) {
  auto parsed = serve::parse_batch_line(line.text);
  if (auto* error = std::get_if<serve::BatchLineError>(&parsed)) {
    // Without a custom_id, the line number is what ties the answer to its line.
    const std::string message =
        error->custom_id ? error->message : fmt::format("Line {}: {}", line.number, error->message);
    return {serve::batch_rejection_line(error->custom_id, message), false};
  }
  return answer_request(ctx, activity, std::get<serve::BatchRequest>(parsed));
}

// Answers arrive from the workers in any order; the writer takes them in
// input order.
class OrderedAnswers {
 public:
  explicit OrderedAnswers(size_t count) : answers_(count) {}

  void put(size_t index, Answer answer) {
    {
      std::lock_guard lock(mu_);
      answers_[index] = std::move(answer);
      ++completed_;
    }
    cv_.notify_all();
  }

  // The answer at `index`, or nothing if it is not ready within `wait`.
  std::optional<Answer> take(size_t index, std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, wait, [&] { return answers_[index].has_value(); })) return std::nullopt;
    return std::exchange(answers_[index], std::nullopt);
  }

  size_t completed() {
    std::lock_guard lock(mu_);
    return completed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<Answer>> answers_;
  size_t completed_ = 0;
};

void log_progress(size_t done, size_t total, Clock::time_point start) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  log::info("Running batch: {:3.0f}% completed | {}/{} [{:.0f} s elapsed, {:.2f} req/s]",
            total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0, done, total, elapsed,
            elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0);
}

// Runs every line, at most `max_in_flight` at once, and writes the answers in
// order. Returns how many were answered with status 200.
size_t run_lines(const serve::ServingContext& ctx, const std::vector<serve::BatchFileLine>& lines,
                 size_t max_in_flight, OutputFile& out) {
  serve::ActivityCounter activity;
  OrderedAnswers answers(lines.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::vector<std::jthread> workers;  // declared last: joined before what they use goes
  const size_t worker_count = std::min(lines.size(), max_in_flight);
  for (size_t w = 0; w < worker_count; ++w) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < lines.size() && !stop; i = next++) {
        answers.put(i, answer_line(ctx, activity, lines[i]));
      }
    });
  }
  log::info("Running {} requests, {} at a time...", lines.size(), worker_count);

  const auto start = Clock::now();
  auto last_progress = start;
  size_t ok = 0;
  try {
    for (size_t i = 0; i < lines.size(); ++i) {
      std::optional<Answer> answer;
      while (!(answer = answers.take(i, std::chrono::milliseconds(500)))) {
        if (Clock::now() - last_progress >= kProgressInterval) {
          last_progress = Clock::now();
          log_progress(answers.completed(), lines.size(), start);
        }
      }
      out.write_line(answer->line);
      ok += answer->ok ? 1 : 0;
    }
  } catch (...) {
    // The output is lost: stop taking lines and abort those in flight, so
    // that the workers return before the error does.
    stop = true;
    ctx.engine->shutdown(std::chrono::milliseconds(0));
    throw;
  }
  log_progress(lines.size(), lines.size(), start);
  return ok;
}

int run_batch(RunBatchArgs& a) {
  tune_malloc_for_serving();
  log::info("hyllm batch processing version {}", kVersion);
  log_non_default_args(a.model);
  if (is_url(a.input_file)) {
    fail(ErrorCode::kUnsupported, "--input-file {}: URLs are not supported; download the file and give its path",
         a.input_file);
  }
  if (is_url(a.output_file)) {
    fail(ErrorCode::kUnsupported, "--output-file {}: URLs are not supported; give a local path", a.output_file);
  }
  // Cheap checks first: the flags, the model's config, both files.
  ServingPlan plan = plan_serving(a.model);
  log::info("Reading batch from {}...", a.input_file == "-" ? "stdin" : a.input_file);
  const std::string input = read_input(a.input_file);
  const std::vector<serve::BatchFileLine> lines = serve::batch_request_lines(input);
  OutputFile out(a.output_file);
  if (lines.empty()) {
    log::info("{} holds no requests: nothing to run", a.input_file);
    out.close();
    return 0;
  }

  // Declared before the context: its engine frees device memory through them.
  std::vector<std::unique_ptr<Backend>> backends;
  std::unique_ptr<serve::ServingContext> ctx = load_serving_context(a.model, plan, backends);
  const size_t max_in_flight = 2 * static_cast<size_t>(plan.config.max_num_seqs);
  const size_t ok = run_lines(*ctx, lines, max_in_flight, out);
  out.close();
  ctx->engine->shutdown(std::chrono::milliseconds(0));
  log::info("Batch complete: {} requests, {} answered 200, {} failed; wrote {}", lines.size(), ok, lines.size() - ok,
            a.output_file == "-" ? "stdout" : a.output_file);
  return 0;
}

void setup_run_batch(CLI::App& sub, int& exit_code) {
  auto args = std::make_shared<RunBatchArgs>();
  sub.add_option("-i,--input-file,--input_file", args->input_file,
                 "The OpenAI Batch API input file (JSONL; - for stdin)")
      ->required();
  sub.add_option("-o,--output-file,--output_file", args->output_file, "Where the answers go (JSONL; - for stdout)")
      ->required();
  add_model_flags(sub, args->model);
  sub.callback([args, &exit_code, &sub] {
    record_non_default(sub, args->model);
    exit_code = run_batch(*args);
  });
}

const CommandRegistration kRegistration{
    "run-batch", "Answer an OpenAI Batch API file offline, in process (vllm run-batch's flags)", setup_run_batch};

}  // namespace
}  // namespace hyllm::app
