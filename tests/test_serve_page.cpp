// The chat page at / in headless Chromium (Debian's chromium package): the page asks a question
// through its own streaming code (?q=), and the DOM Chromium ends with holds the user's bubble,
// the thinking in a collapsed <details> and the answer equal to the API's answer for the same
// request at temperature 0. A screenshot is kept in the build tree (serve_chat_page.png).
// Skips with a message when chromium is not installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "support/paths.h"
#include "support/serve_support.h"

namespace {

using json = nlohmann::json;

std::string unescape_html(std::string s) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"&lt;", "<"},
                                 {"&gt;", ">"},
                                 {"&quot;", "\""},
                                 {"&#39;", "'"},
                                 {"&nbsp;", "\xC2\xA0"},
                                 {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

TEST(ServePage, ChromiumChatsThroughThePage) {
  if (boltrt::test::run_command("command -v chromium >/dev/null") != 0)
    GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
  boltrt::test::ServeProcess server(
      {"-m", boltrt::test::source_dir() + "/models/tiny/tiny-q8_0.gguf", "-t", "1"});
  const std::string question = "What did you think of the ball?";
  const json request = {{"model", "m"},
                        {"messages", json::array({{{"role", "user"}, {"content", question}}})},
                        {"temperature", 0},
                        {"max_tokens", 512},
                        {"reasoning", "on"}};
  const auto api =
      boltrt::test::http_request(server.port(), "POST", "/v1/chat/completions", request.dump());
  ASSERT_EQ(api.status, 200) << api.body;
  const json message = json::parse(api.body)["choices"][0]["message"];

  const std::string profile = boltrt::test::scratch_dir("chromium_profile");
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) +
                          "/?temp=0&think=1&q=What%20did%20you%20think%20of%20the%20ball%3F";
  const std::string chromium =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run "
      "--user-data-dir=" +
      profile + " --virtual-time-budget=20000 --window-size=1000,700 ";
  const auto dom = boltrt::test::run_command_split(chromium + "--dump-dom '" + url + "'");
  ASSERT_EQ(dom.status, 0) << dom.err;
  const std::string& html = dom.out;
  EXPECT_NE(html.find("<div class=\"msg user\">" + question + "</div>"), std::string::npos) << html;
  // The answer bubble: <details class="thinking">…<div>THOUGHT</div></details><div>ANSWER</div>
  std::smatch m;
  const std::regex bubble(
      "<div class=\"msg assistant\"><details class=\"thinking\"( hidden=\"\")?><summary>"
      "Thinking</summary><div>([^<]*)</div></details><div>([^<]*)</div>");
  ASSERT_TRUE(std::regex_search(html, m, bubble)) << html;
  const std::string reasoning = message.value("reasoning_content", "");
  EXPECT_EQ(m[1].matched, reasoning.empty()) << "thinking shown exactly when there is some";
  EXPECT_EQ(unescape_html(m[2].str()), reasoning);
  EXPECT_EQ(unescape_html(m[3].str()), message["content"].get<std::string>());
  EXPECT_EQ(html.find("<details class=\"thinking\" open"), std::string::npos) << "collapsed";

  const std::string shot = boltrt::test::binary_dir() + "/serve_chat_page.png";
  std::filesystem::remove(shot);
  const auto png =
      boltrt::test::run_command_split(chromium + "--screenshot=" + shot + " '" + url + "'");
  ASSERT_EQ(png.status, 0) << png.err;
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
