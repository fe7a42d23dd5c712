// The chat page at / in headless Chromium (Debian's chromium package, installed by
// tools/setup.sh): the page asks a question through its own streaming code (?q=), and the DOM
// Chromium ends with holds the user's bubble, the thinking in a collapsed <details> and the
// answer equal to the API's answer for the same request at temperature 0. A screenshot is kept
// in the build tree (serve_chat_page.png). Skips with a message when chromium is not installed.
//
// Chromium is driven over the DevTools protocol on a pipe (support/chromium.h), and the test polls
// the DOM until the page's request has finished, with a real-time deadline. A virtual-time
// budget (--dump-dom --virtual-time-budget) does not work here: virtual time runs on while a
// stream is pending, so a slow (sanitized) server was cut off mid-answer.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "support/chromium.h"
#include "support/paths.h"
#include "support/serve_support.h"

namespace {

using boltrt::test::base64_decode;
using boltrt::test::Chromium;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

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
    GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it)";
  boltrt::test::ServeProcess server(
      {"-m", boltrt::test::source_dir() + "/models/tiny/tiny-q8_0.gguf", "-t", "1"});
  const std::string question = "What did you think of the ball?";
  const json request = {{"model", "m"},
                        {"messages", json::array({{{"role", "user"}, {"content", question}}})},
                        {"temperature", 0},
                        {"max_tokens", 512},
                        {"reasoning", "on"}};
  const auto api = boltrt::test::http_request(server.port(), "POST", "/v1/chat/completions",
                                              request.dump(), "", std::chrono::seconds(600));
  ASSERT_EQ(api.status, 200) << api.body;
  const json message = json::parse(api.body)["choices"][0]["message"];

  const std::string scratch = boltrt::test::scratch_dir("chromium");
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) +
                          "/?temp=0&think=1&q=What%20did%20you%20think%20of%20the%20ball%3F";
  // Real time, however slow the server: a sanitized build streams this answer in minutes.
  const auto deadline = Clock::now() + 600s;
  Chromium browser({"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--user-data-dir=" + scratch + "/profile", "--window-size=1000,700",
                    "--remote-debugging-pipe", "about:blank"},
                   scratch + "/chromium.log");
  const json target = browser.call("Target.createTarget", {{"url", url}}, "", deadline);
  const std::string session =
      browser.call("Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}},
                   "", deadline)["sessionId"];
  // The page's request has finished (answered, or failed with an error bubble) once its
  // assistant bubble exists and the Stop button is Send again (send() sets Stop before its
  // first await and Send in its finally block).
  const std::string finished =
      "!!document.querySelector('.msg.assistant') && "
      "document.getElementById('send').textContent === 'Send'";
  while (browser.evaluate(session, finished, deadline) != json(true)) {
    ASSERT_TRUE(Clock::now() < deadline) << "the page did not finish its answer";
    std::this_thread::sleep_for(100ms);
  }
  const std::string html =
      browser.evaluate(session, "document.documentElement.outerHTML", deadline).get<std::string>();
  EXPECT_EQ(html.find("<div class=\"msg error\">"), std::string::npos) << html;
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
  const json png = browser.call("Page.captureScreenshot", {{"format", "png"}}, session, deadline);
  {
    std::ofstream out(shot, std::ios::binary);
    out << base64_decode(png.value("data", ""));
  }
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
