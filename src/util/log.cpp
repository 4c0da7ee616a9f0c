#include "util/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "util/env.h"

namespace hyllm {

void init_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("hyllm");
  // vLLM-like lines: "INFO 11-30 16:20:01 message".
  logger->set_pattern("%^%l%$ %m-%d %H:%M:%S %v");
  spdlog::set_default_logger(logger);
  const std::string& wanted = level.empty() ? env().log_level : level;
  spdlog::set_level(spdlog::level::from_str(wanted));
}

}  // namespace hyllm
