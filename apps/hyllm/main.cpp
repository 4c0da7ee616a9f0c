// hyllm: one binary, subcommands registered in apps/hyllm/cmd_*.cpp.

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "build_commit.h"
#include "command.h"
#include "util/log.h"
#include "util/status.h"
#include "util/version.h"

namespace hyllm::app {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

}  // namespace hyllm::app

int main(int argc, char** argv) {
  using namespace hyllm;
  CLI::App app{"hyllm: an inference engine and OpenAI-compatible server for hybrid linear-attention LLMs"};
  app.name("hyllm");
  app.set_version_flag("--version", std::string("hyllm ") + kVersion + " (commit " + kBuildCommit + ")");
  app.require_subcommand(0, 1);

  auto& commands = app::command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return std::string_view(a.name) < b.name; });
  int exit_code = 0;
  for (const auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    c.setup(*sub, exit_code);
  }

  // vLLM's multi-letter short options, which CLI11 cannot declare, become
  // their long names.
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a == "-tp") a = "--tensor-parallel-size";
    if (a == "-pp") a = "--pipeline-parallel-size";
    if (a == "-dp") a = "--data-parallel-size";
  }
  std::vector<const char*> arg_ptrs;
  for (const std::string& a : args) arg_ptrs.push_back(a.c_str());

  init_logging();
  try {
    app.parse(argc, arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  return exit_code;
}
