// boltrt — command-line entry point. Subcommands live in cmd_*.cpp and register themselves.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "command.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

int default_threads() { return physical_core_count(); }

}  // namespace boltrt::cli

int main(int argc, char** argv) {
  using namespace boltrt::cli;
  CLI::App app{"boltrt — inference engine for Nemotron 3.5 Bolt and the Gemma 4 family"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "boltrt 0.1.0");
  auto& commands = command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  for (auto& c : commands) c.setup(*app.add_subcommand(c.name, c.help));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ExitRequest& e) {
    return e.code;
  } catch (const boltrt::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "boltrt: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    fmt::print(stderr, "boltrt: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "boltrt: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
