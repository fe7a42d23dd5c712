// Paths tests need: the source tree, the build tree, the boltrt CLI, and optional references.
#pragma once
#include <functional>
#include <string>

namespace boltrt::test {

// Each is the build's own path unless BOLTRT_TEST_SOURCE_DIR / BOLTRT_TEST_BINARY_DIR /
// BOLTRT_TEST_CLI names another (prebuilt tests run on another machine).
std::string source_dir();  // repository root
std::string binary_dir();  // CMake build directory
std::string cli_path();    // the built `boltrt` executable
// A fresh, empty directory under the build tree, private to this test process.
std::string scratch_dir(const std::string& name);
// llama-ref's bin directory ($LLAMA_REF_BIN, else $HOME/.cache/llama-ref/build/bin) or "" when
// absent. Tests that need it skip with a message naming the build command.
std::string llama_ref_bin();
// tests/llama_ref/NAME.cpp compiled (c++, once per test process) against llama-ref's headers and
// libraries: a program of ours that calls llama.cpp's API directly. Returns its path, or "" with
// the compiler's output in *error (llama-ref absent: "llama-ref not built").
std::string llama_ref_tool(const std::string& name, std::string* error);
// `s` in single quotes for /bin/sh (each ' written as '\''), so any path or text is one word.
std::string shell_quote(const std::string& s);
// Runs a shell command, returns its exit status; stdout+stderr go to *output when given.
int run_command(const std::string& command, std::string* output = nullptr);

// Runs a shell command with stdout and stderr kept apart.
struct CommandOutput {
  int status = -1;
  std::string out, err;
};
CommandOutput run_command_split(const std::string& command);

// A llama-ref tool's run (llama-completion, llama-perplexity): stdout and stderr through files.
// Those tools print through llama.cpp's asynchronous logger, which now and then ends a run
// without its last lines (exit status 0; measured on the 2-core box: llama-perplexity into a
// pipe 9 runs of 15, llama-completion 1 of 10 into a file). A run counts only when
// `complete` holds for it; up to 5 runs, then the last one is returned as it is.
CommandOutput run_reference(const std::string& command,
                            const std::function<bool(const CommandOutput&)>& complete);

}  // namespace boltrt::test
