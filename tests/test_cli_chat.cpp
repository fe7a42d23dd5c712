// `boltrt chat` end to end on a synthesized tiny Gemma 4: piped stdin (one turn per line),
// commands, agreement with `generate --chat`, and a pseudo-terminal session (libedit) with
// Ctrl-C.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/paths.h"

namespace boltrt {
namespace {

using test::shell_quote;

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

using Outcome = test::CommandOutput;

Outcome run(const std::string& command) {
  return test::run_command_split(command);
}

std::string boltrt() {
  return shell_quote(test::cli_path());
}

class CliChat : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("cli_chat");
    model_ = dir_ + "/tiny-q8_0.gguf";
    const std::string vocab = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
    std::string command = boltrt() + " synth --preset tiny --type q8_0 -o " + shell_quote(model_);
    if (fs::exists(vocab)) command += " --vocab-from " + shell_quote(vocab);
    const Outcome r = run(command);
    synth_error_ = r.status == 0 ? "" : command + " failed: " + r.out + r.err;
  }
  void SetUp() override { ASSERT_EQ(synth_error_, "") << "cannot synthesize the test model"; }

  static std::string chat(const std::string& args) {
    return boltrt() + " chat -m " + shell_quote(model_) + " -t 2 --temp 0 -n 8 " + args;
  }

  static std::string dir_, model_, synth_error_;
};
std::string CliChat::dir_, CliChat::model_, CliChat::synth_error_;

TEST_F(CliChat, PipedTurnsMatchGenerate) {
  const Outcome first =
      run(boltrt() + " generate -m " + shell_quote(model_) + " -t 2 --temp 0 -n 8 --chat -p hello");
  ASSERT_EQ(first.status, 0) << first.err;
  const Outcome r = run("printf 'hello\\n/stats\\nand then?\\n/exit\\nignored\\n' | " + chat(""));
  ASSERT_EQ(r.status, 0) << r.err;
  // The first answer is what generate --chat prints for the same single turn.
  EXPECT_EQ(r.out.substr(0, first.out.size() + 1), first.out + "\n") << r.out;
  EXPECT_NE(r.out.find("last answer: prompt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("session: 1 answers"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST_F(CliChat, CommandsFromAPipe) {
  const std::string saved = dir_ + "/conversation.json";
  const Outcome r = run("printf '/system be brief\\n/think on\\nhi\\n/save " + saved +
                        "\\n/reset\\n/load " + saved + "\\n/bogus\\n' | " + chat(""));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(system prompt set)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(thinking on)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(saved 2 messages"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(loaded 2 messages"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "error: unknown command /bogus (try /help)\n");
  EXPECT_NE(read_file(saved).find("\"be brief\""), std::string::npos);
}

TEST_F(CliChat, Errors) {
  const Outcome missing = run("echo hi | " + boltrt() + " chat -m /nonexistent/m.gguf");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("/nonexistent/m.gguf"), std::string::npos) << missing.err;
  const Outcome bad = run("echo hi | " + chat("--think maybe"));
  EXPECT_NE(bad.status, 0);
}

// A pseudo-terminal session through util-linux `script`: libedit reads the lines; Ctrl-C.
TEST_F(CliChat, TerminalSession) {
  if (test::run_command("command -v script >/dev/null") != 0) {
    GTEST_SKIP() << "util-linux `script` is not installed (needed for a pseudo-terminal)";
  }
  const Outcome r = run("(printf 'hello\\n'; sleep 3; printf '/exit\\n') | script -qec " +
                        shell_quote(chat("")) + " /dev/null");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("/help for commands"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("> "), std::string::npos) << r.out;

  // Ctrl-C typed at the prompt: a hint and a new prompt, then the second one exits with 130.
  // The first Ctrl-C is typed only once the chat (found by a seed no other test uses) has
  // installed its SIGINT handler (SigCgt bit 2), however slowly it starts on a busy machine.
  const std::string wait_for_handler =
      "for i in $(seq 1200); do for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f 2>/dev/null | "
      "grep -q -- '^[^ ]*boltrt chat .*--seed 7391577' && pid=${f#/proc/} && pid=${pid%/*}; done; "
      "m=$(awk '/^SigCgt/{print $2}' /proc/${pid:-0}/status 2>/dev/null); "
      "[ -n \"$m\" ] && (( 0x$m & 2 )) && break; sleep 0.05; done; sleep 0.5; ";
  const Outcome interrupted = run(
      "bash -c " + shell_quote("(" + wait_for_handler +
                               "printf '\\003'; sleep 1; printf '\\003'; sleep 2) | script -qec " +
                               shell_quote(chat("--seed 7391577")) + " /dev/null"));
  EXPECT_EQ(interrupted.status, 130) << interrupted.out << interrupted.err;
  EXPECT_NE(interrupted.out.find("press Ctrl-C again"), std::string::npos) << interrupted.out;
}

// SIGINT while waiting for input: the first prints a hint, the second exits with 130.
TEST_F(CliChat, InterruptAtThePromptExits130) {
  if (test::run_command("command -v bash >/dev/null") != 0) GTEST_SKIP() << "no bash";
  // stdin is a FIFO held open by the shell, so the chat waits at its prompt; the first Ctrl-C
  // is sent only once the process has installed its SIGINT handler (SigCgt bit 2 in
  // /proc/PID/status), however slowly the model loads on a busy machine.
  const std::string fifo = dir_ + "/stdin." + std::to_string(getpid());
  const std::string script =
      "rm -f " + fifo + "; mkfifo " + fifo + "; " + chat("") + " <" + fifo + " & pid=$!; exec 3>" +
      fifo +
      "; for i in $(seq 1200); do m=$(awk '/^SigCgt/{print $2}' /proc/$pid/status 2>/dev/null); "
      "[ -n \"$m\" ] && (( 0x$m & 2 )) && break; sleep 0.05; done; sleep 0.5; "
      "kill -INT $pid; sleep 1; kill -INT $pid; wait $pid; echo status=$?; exec 3>&-";
  const Outcome r = run("bash -c " + shell_quote(script));
  EXPECT_NE(r.out.find("status=130"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("press Ctrl-C again"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace boltrt
