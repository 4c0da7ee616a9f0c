#pragma once
// Logging goes through spdlog (host code only: it does not compile under nvcc).
// Call init_logging() once from main; the level comes from HYLLM_LOG_LEVEL
// unless given.

#include <spdlog/spdlog.h>

#include <string>

namespace hyllm {

void init_logging(const std::string& level = "");

namespace log {
using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::trace;
using spdlog::warn;
}  // namespace log

}  // namespace hyllm
