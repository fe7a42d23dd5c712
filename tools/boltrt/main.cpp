// boltrt — command-line entry point. Subcommands live in cmd_*.cpp and register themselves.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "command.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

int default_threads() { return physical_core_count(); }

namespace {

// llama.cpp spells the KV cache types -ctk / -ctv; CLI11 cannot declare a multi-letter option
// with one dash, so those spellings (also "-ctk=q8_0") become --cache-type-k / --cache-type-v
// before parsing. Everything after a bare "--" is left alone.
std::vector<std::string> llama_spellings_to_long_options(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    for (const auto& [from, to] :
         {std::pair<std::string_view, std::string_view>{"-ctk", "--cache-type-k"},
          {"-ctv", "--cache-type-v"}}) {
      if (arg == from ||
          (arg.size() > from.size() && arg.starts_with(from) && arg[from.size()] == '=')) {
        arg = std::string(to) + arg.substr(from.size());
        break;
      }
    }
  }
  return args;
}

}  // namespace

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
  std::vector<std::string> args = llama_spellings_to_long_options(argc, argv);
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  try {
    app.parse(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A usage error is one line like every other error (CLI11 would add a second one).
    fmt::print(stderr, "boltrt: error: {}\n", e.what());
    return 2;
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
