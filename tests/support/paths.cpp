#include "support/paths.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace boltrt::test {

std::string source_dir() {
  return BOLTRT_SOURCE_DIR;
}
std::string binary_dir() {
  return BOLTRT_BINARY_DIR;
}
std::string cli_path() {
  return BOLTRT_CLI_PATH;
}

std::string scratch_dir(const std::string& name) {
  namespace fs = std::filesystem;
  // ctest runs every test in its own process, many at once (-j): one directory per process, so
  // two tests of one suite never clear each other's files.
  fs::path dir =
      fs::path(BOLTRT_BINARY_DIR) / "test-scratch" / (name + "." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
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

}  // namespace boltrt::test
