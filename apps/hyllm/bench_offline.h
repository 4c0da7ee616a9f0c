#pragma once
// `hyllm bench throughput` and `hyllm bench latency`: the engine in process,
// no HTTP, like `vllm bench throughput` / `vllm bench latency`.

#include <CLI/CLI.hpp>

namespace hyllm::app {

void add_offline_bench_commands(CLI::App& bench, int& exit_code);

}  // namespace hyllm::app
