// Subcommand registry for the `boltrt` CLI. Each tools/boltrt/cmd_*.cpp registers itself:
//
//   static void setup(CLI::App& sub) { ... sub.callback([...] { ... }); }
//   BOLTRT_COMMAND(inspect, "Print a GGUF file's metadata and tensors", setup);
//
// so adding a command never touches main.cpp. Callbacks signal failure by throwing
// boltrt::Error (printed as one line, exit 1) or by calling exit_with(code).
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace boltrt::cli {

struct Command {
  std::string name;
  std::string help;
  std::function<void(CLI::App&)> setup;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string help, std::function<void(CLI::App&)> setup) {
    command_registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

// Thrown by a command that wants a specific exit status without an error line
// (e.g. 130 after Ctrl-C). main() catches it.
struct ExitRequest {
  int code;
};
[[noreturn]] inline void exit_with(int code) { throw ExitRequest{code}; }

// Default thread count for -t: the number of physical cores.
int default_threads();

}  // namespace boltrt::cli

#define BOLTRT_COMMAND(name, help, setup) \
  static ::boltrt::cli::CommandRegistrar boltrt_command_##name(#name, help, setup)
