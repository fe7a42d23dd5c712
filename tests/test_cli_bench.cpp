// `boltrt bench`: the comma lists of -p / -n / -t / -d expand to one row per combination, in
// llama-bench's order and with its names ("pp4 @ d16"); bad lists fail with one error line.
// Only the rows and fields are checked, never a timing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/paths.h"

namespace boltrt {
namespace {

using Outcome = test::CommandOutput;

Outcome bench(const std::string& args) {
  return test::run_command_split(test::cli_path() + " bench -m " + test::source_dir() +
                                 "/models/tiny/tiny-f32.gguf -r 1 " + args);
}

// The (threads, test) columns of the markdown table's rows.
std::vector<std::pair<std::string, std::string>> table_rows(const std::string& out) {
  std::vector<std::pair<std::string, std::string>> rows;
  std::istringstream in(out);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (++n <= 2) continue;  // header and alignment rows
    std::vector<std::string> cells;
    std::istringstream cols(line);
    std::string cell;
    while (std::getline(cols, cell, '|')) {
      const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
      cells.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
    }
    // "| model | size | params | backend | threads | test | t/s |": cells[0] is empty
    if (cells.size() < 8) {
      ADD_FAILURE() << "not a table row: " << line;
      continue;
    }
    rows.emplace_back(cells[5], cells[6]);
  }
  return rows;
}

TEST(CliBench, CommaListsGiveEveryCombinationInLlamaBenchOrder) {
  const Outcome r = bench("-p 4,8 -n 2 -t 1,2 -d 0,16");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::pair<std::string, std::string>> want = {
      {"1", "pp4"},       {"1", "pp8"},       {"1", "tg2"},       {"1", "pp4 @ d16"},
      {"1", "pp8 @ d16"}, {"1", "tg2 @ d16"}, {"2", "pp4"},       {"2", "pp8"},
      {"2", "tg2"},       {"2", "pp4 @ d16"}, {"2", "pp8 @ d16"}, {"2", "tg2 @ d16"}};
  EXPECT_EQ(table_rows(r.out), want) << r.out;
}

TEST(CliBench, ZeroSizesAreSkipped) {
  const Outcome r = bench("-p 0 -n 3,0,5 -t 1");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::pair<std::string, std::string>> want = {{"1", "tg3"}, {"1", "tg5"}};
  EXPECT_EQ(table_rows(r.out), want) << r.out;
}

TEST(CliBench, JsonRowsCarryTheDepthAndKvType) {
  const Outcome r = bench("-p 4 -n 3 -t 1 -d 20 -o json --kv-type q4_0");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc.size(), 2u) << r.out;
  EXPECT_EQ(doc[0].at("n_prompt"), 4);
  EXPECT_EQ(doc[0].at("n_gen"), 0);
  EXPECT_EQ(doc[1].at("n_prompt"), 0);
  EXPECT_EQ(doc[1].at("n_gen"), 3);
  for (const auto& row : doc) {
    EXPECT_EQ(row.at("n_depth"), 20);
    EXPECT_EQ(row.at("n_threads"), 1);
    EXPECT_EQ(row.at("type_k"), "q4_0");
    EXPECT_EQ(row.at("samples_ns").size(), 1u);
  }
}

// A depth deeper than a sliding window plus the micro-batch: the rows still run (each
// repetition returns to the depth, recomputing it where the window's ring cannot roll back).
TEST(CliBench, DepthBeyondTheSlidingWindow) {
  const Outcome r = bench("-p 40 -n 2 -t 1 -d 300 -b 16 -r 2");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::pair<std::string, std::string>> want = {{"1", "pp40 @ d300"},
                                                                 {"1", "tg2 @ d300"}};
  EXPECT_EQ(table_rows(r.out), want) << r.out;
}

TEST(CliBench, BadListsFailWithOneLine) {
  for (const auto& [args, line] : std::vector<std::pair<std::string, std::string>>{
           {"-p 4,x", "boltrt: error: bench: -p '4,x' is not a comma list of integers >= 0\n"},
           {"-n 4,", "boltrt: error: bench: -n '4,' is not a comma list of integers >= 0\n"},
           {"-d -3", "boltrt: error: bench: -d '-3' is not a comma list of integers >= 0\n"},
           {"-t 1,,2", "boltrt: error: bench: -t '1,,2' is not a comma list of integers >= 0\n"},
           {"--kv-type q5_0",
            "boltrt: error: --kv-type: 'q5_0' is not one of f16, f32, q8_0, q4_0\n"}}) {
    const Outcome r = bench(args);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_EQ(r.err, line) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
}  // namespace boltrt
