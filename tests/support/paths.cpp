#include "support/paths.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace boltrt::test {

namespace {
// The build's own paths, unless the environment names others: test binaries built on one machine
// and run on another (bench/gpu-check.sh carries prebuilt CUDA tests to a lent GPU machine, where
// the repository sits elsewhere).
std::string path_from_env(const char* variable, const char* built_in) {
  const char* value = std::getenv(variable);
  return value && *value ? value : built_in;
}
}  // namespace

std::string source_dir() {
  return path_from_env("BOLTRT_TEST_SOURCE_DIR", BOLTRT_SOURCE_DIR);
}
std::string binary_dir() {
  return path_from_env("BOLTRT_TEST_BINARY_DIR", BOLTRT_BINARY_DIR);
}
std::string cli_path() {
  return path_from_env("BOLTRT_TEST_CLI", BOLTRT_CLI_PATH);
}

namespace {
// Scratch directories this process made; removed when it exits (CI's disk is small: the synthesized
// GGUFs of ~400 test processes add up). BOLTRT_KEEP_SCRATCH=1 keeps them for debugging.
std::vector<std::filesystem::path>& scratch_dirs_made() {
  static std::vector<std::filesystem::path> dirs;
  return dirs;
}
void remove_scratch_dirs() {
  if (const char* keep = std::getenv("BOLTRT_KEEP_SCRATCH"); keep && *keep && *keep != '0') return;
  std::error_code ec;
  for (const auto& dir : scratch_dirs_made()) std::filesystem::remove_all(dir, ec);
}
}  // namespace

std::string scratch_dir(const std::string& name) {
  namespace fs = std::filesystem;
  // ctest runs every test in its own process, many at once (-j): one directory per process, so
  // two tests of one suite never clear each other's files.
  fs::path dir =
      fs::path(BOLTRT_BINARY_DIR) / "test-scratch" / (name + "." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  if (scratch_dirs_made().empty()) std::atexit(remove_scratch_dirs);
  scratch_dirs_made().push_back(dir);
  return dir.string();
}

std::string llama_ref_bin() {
  namespace fs = std::filesystem;
  std::string dir;
  if (const char* env = std::getenv("LLAMA_REF_BIN")) {
    dir = env;
  } else if (const char* home = std::getenv("HOME")) {
    dir = std::string(home) + "/.cache/llama-ref/build/bin";
  }
  if (!dir.empty() && fs::exists(fs::path(dir) / "llama_logits")) return dir;
  return "";
}

std::string llama_ref_tool(const std::string& name, std::string* error) {
  namespace fs = std::filesystem;
  const std::string bin = llama_ref_bin();
  if (bin.empty()) {
    *error = "llama-ref not built";
    return "";
  }
  static std::map<std::string, std::string> built;  // name -> executable, this process
  if (const auto it = built.find(name); it != built.end()) return it->second;
  const fs::path tree = fs::path(bin) / ".." / ".." / "src";  // DIR/build/bin -> DIR/src
  const std::string exe = scratch_dir("llama_ref_" + name) + "/" + name;
  const std::string command = "c++ -O2 -std=c++17 -I" + shell_quote((tree / "include").string()) +
                              " -I" + shell_quote((tree / "ggml" / "include").string()) + " " +
                              shell_quote(source_dir() + "/tests/llama_ref/" + name + ".cpp") +
                              " -L" + shell_quote(bin) + " -lllama -lggml -lggml-base -Wl,-rpath," +
                              shell_quote(bin) + " -o " + shell_quote(exe);
  std::string output;
  if (run_command(command, &output) != 0) {
    *error = command + "\n" + output;
    return "";
  }
  built[name] = exe;
  return exe;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int run_command(const std::string& command, std::string* output) {
  std::string full = command + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    if (output) output->append(buffer, n);
  }
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {
// A scratch file's whole contents; the file is removed.
std::string take_file(const std::string& path) {
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  std::filesystem::remove(path);
  return text;
}
}  // namespace

CommandOutput run_command_split(const std::string& command) {
  static int counter = 0;
  const std::string err_path = binary_dir() + "/test-scratch/stderr." + std::to_string(getpid()) +
                               "." + std::to_string(counter++);
  std::filesystem::create_directories(binary_dir() + "/test-scratch");
  CommandOutput r;
  // The inner redirection wins over the 2>&1 that run_command appends to the outer group.
  r.status = run_command("( (" + command + ") 2>'" + err_path + "' )", &r.out);
  r.err = take_file(err_path);
  return r;
}

CommandOutput run_reference(const std::string& command,
                            const std::function<bool(const CommandOutput&)>& complete) {
  static int counter = 0;
  const std::string base = binary_dir() + "/test-scratch/reference." + std::to_string(getpid()) +
                           "." + std::to_string(counter++);
  std::filesystem::create_directories(binary_dir() + "/test-scratch");
  CommandOutput r;
  for (int run = 0; run < 5; ++run) {
    r.status = run_command("( (" + command + ") >'" + base + ".out' 2>'" + base + ".err' )");
    r.out = take_file(base + ".out");
    r.err = take_file(base + ".err");
    if (r.status != 0 || complete(r)) break;
  }
  return r;
}

}  // namespace boltrt::test
