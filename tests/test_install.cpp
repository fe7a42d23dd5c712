// Packaging: installs this build to a fresh prefix with `cmake --install`, then builds
// examples/embed.cpp against the installed files only — once with find_package(boltrt) and once
// with pkg-config — and runs both programs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include "support/paths.h"

namespace {

namespace fs = std::filesystem;
using boltrt::test::run_command;

// Extra flags when this build is sanitized: the installed static library needs the runtime.
std::string sanitizer_flags() {
#if defined(__SANITIZE_ADDRESS__)
  return "-fsanitize=address,undefined";
#else
  return "";
#endif
}

std::string sh_quote(const std::string& s) {
  return "'" + s + "'";
}

class Install : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ctest runs each test in its own process, in parallel: one prefix per process.
    dir_ = boltrt::test::scratch_dir("install-" + std::to_string(getpid()));
    prefix_ = dir_ + "/prefix";
    std::string log;
    install_status_ = run_command("cmake --install " + sh_quote(boltrt::test::binary_dir()) +
                                      " --prefix " + sh_quote(prefix_),
                                  &log);
    install_log_ = log;
  }
  static inline std::string dir_, prefix_, install_log_;
  static inline int install_status_ = -1;
};

TEST_F(Install, InstallsOnlyThePublicSurface) {
  ASSERT_EQ(install_status_, 0) << install_log_;
  EXPECT_TRUE(fs::exists(prefix_ + "/bin/boltrt"));
  EXPECT_TRUE(fs::exists(prefix_ + "/lib/libboltrt_core.a"));
  EXPECT_TRUE(fs::exists(prefix_ + "/lib/cmake/boltrt/boltrtConfig.cmake"));
  EXPECT_TRUE(fs::exists(prefix_ + "/lib/cmake/boltrt/boltrtConfigVersion.cmake"));
  EXPECT_TRUE(fs::exists(prefix_ + "/lib/pkgconfig/boltrt.pc"));
  std::vector<std::string> headers;
  for (const auto& entry : fs::recursive_directory_iterator(prefix_ + "/include"))
    if (entry.is_regular_file()) headers.push_back(fs::relative(entry.path(), prefix_).string());
  std::sort(headers.begin(), headers.end());
  EXPECT_EQ(headers,
            (std::vector<std::string>{"include/boltrt/boltrt.h", "include/boltrt/error.h"}));
}

// The example reports a missing model as one boltrt::Error line, prints its usage without an
// argument, and answers on a model synthesized by the installed CLI.
void expect_example_runs(const std::string& program, const std::string& prefix) {
  std::string out;
  EXPECT_EQ(run_command(sh_quote(program), &out), 2) << out;
  EXPECT_NE(out.find("usage:"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(run_command(sh_quote(program) + " /nonexistent/model.gguf", &out), 1) << out;
  EXPECT_EQ(out, "embed: /nonexistent/model.gguf: no such file\n");
  const std::string model = program + ".tiny.gguf";
  out.clear();
  ASSERT_EQ(
      run_command(sh_quote(prefix + "/bin/boltrt") + " synth --preset tiny -o " + sh_quote(model),
                  &out),
      0)
      << out;
  out.clear();
  EXPECT_EQ(run_command(sh_quote(program) + " " + sh_quote(model) + " Hello", &out), 0) << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(\n\[[0-9]+ tokens, [0-9.]+ tokens/s, (eog|length)\]\n$)")))
      << out;
}

TEST_F(Install, ExampleBuildsWithFindPackage) {
  ASSERT_EQ(install_status_, 0) << install_log_;
  const std::string build = dir_ + "/example-cmake";
  std::string flags = sanitizer_flags();
  std::string log;
  ASSERT_EQ(run_command("cmake -S " + sh_quote(boltrt::test::source_dir() + "/examples") + " -B " +
                            sh_quote(build) + " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" +
                            sh_quote(prefix_) + " -DCMAKE_CXX_FLAGS=" + sh_quote(flags) +
                            " -DCMAKE_EXE_LINKER_FLAGS=" + sh_quote(flags) + " && cmake --build " +
                            sh_quote(build),
                        &log),
            0)
      << log;
  expect_example_runs(build + "/embed", prefix_);
}

TEST_F(Install, ExampleBuildsWithPkgConfig) {
  ASSERT_EQ(install_status_, 0) << install_log_;
  const std::string program = dir_ + "/embed-pkgconfig";
  std::string log;
  ASSERT_EQ(run_command("PKG_CONFIG_PATH=" + sh_quote(prefix_ + "/lib/pkgconfig") + " c++ " +
                            sanitizer_flags() + " " +
                            sh_quote(boltrt::test::source_dir() + "/examples/embed.cpp") +
                            " $(PKG_CONFIG_PATH=" + sh_quote(prefix_ + "/lib/pkgconfig") +
                            " pkg-config --cflags --libs boltrt) -o " + sh_quote(program),
                        &log),
            0)
      << log;
  expect_example_runs(program, prefix_);
}

}  // namespace
