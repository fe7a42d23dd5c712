// The official `openai` npm client (tests/serve_client, version pinned in its package.json)
// driving `boltrt serve` on the tiny model: models, chat streamed and not (equal text), the
// stream helper, multi-turn prefix caching, completions, a json_schema response_format that
// chat.completions.parse parses, errors, an aborted stream, and 16 concurrent greedy streams
// equal to sequential runs. Skips only when node or npm is missing;
// installs the package (npm install, what tools/fetch-test-data.sh does) when it is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/paths.h"
#include "support/serve_support.h"

namespace {

TEST(ServeClient, OfficialOpenAiNodeClient) {
  if (boltrt::test::run_command("command -v node >/dev/null && command -v npm >/dev/null") != 0)
    GTEST_SKIP() << "node and npm are needed for the openai client test (tools/setup.sh)";
  const std::string dir = boltrt::test::source_dir() + "/tests/serve_client";
  if (!std::filesystem::exists(dir + "/node_modules/openai/package.json")) {
    std::string out;
    const int rc = boltrt::test::run_command(
        "cd '" + dir + "' && npm install --no-audit --no-fund --loglevel=error", &out);
    ASSERT_EQ(rc, 0) << "npm install in tests/serve_client failed (run tools/fetch-test-data.sh "
                        "where the npm registry is reachable):\n"
                     << out;
  }
  boltrt::test::ServeProcess server({"-m",
                                     boltrt::test::source_dir() + "/models/tiny/tiny-q8_0.gguf",
                                     "-t", "1", "--parallel", "4", "-c", "1024"});
  std::string out;
  const int rc = boltrt::test::run_command(
      "cd '" + dir + "' && timeout 600 node client.mjs http://127.0.0.1:" +
          std::to_string(server.port()) + "/v1",
      &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  EXPECT_NE(out.find("ok   n choices"), std::string::npos) << out;
  EXPECT_NE(out.find("ok   logit_bias"), std::string::npos) << out;
  EXPECT_NE(out.find("ok   16 concurrent streams"), std::string::npos) << out;
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

}  // namespace
