#pragma once
// Subcommands register themselves from their own files:
//   static const CommandRegistration reg{"serve", "Start the server", setup_serve};
// setup adds the subcommand's options to `sub` and sets its callback, which
// stores the process exit code in `exit_code`.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace hyllm::app {

using CommandSetup = void (*)(CLI::App& sub, int& exit_code);

struct CommandEntry {
  const char* name;
  const char* description;
  CommandSetup setup;
};

std::vector<CommandEntry>& command_registry();

struct CommandRegistration {
  CommandRegistration(const char* name, const char* description, CommandSetup setup) {
    command_registry().push_back({name, description, setup});
  }
};

}  // namespace hyllm::app
