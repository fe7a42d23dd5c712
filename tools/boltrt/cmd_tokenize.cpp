// boltrt tokenize — text to token ids with a model's (or a vocabulary-only GGUF's) tokenizer,
// printed the way llama-tokenize prints them:
//   default   one line per token:  "%6d -> 'piece'"
//   --ids     one list:            "[2, 9259, 236764]"
// Like llama-tokenize, backslash escapes in the text are processed unless --no-escape.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "command.h"
#include "gguf/gguf.h"
#include "text/escapes.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string prompt;
  std::string file;
  bool use_stdin = false;
  bool ids = false;
  bool no_bos = false;
  bool no_parse_special = false;
  bool show_count = false;
  bool no_escape = false;
  bool timings = false;
};

std::string read_input(const TokenizeOptions& o) {
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) fail("{}: cannot open for reading", o.file);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  if (o.use_stdin) {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  return o.prompt;
}

void run(const TokenizeOptions& o) {
  using clock = std::chrono::steady_clock;
  std::string text = read_input(o);
  if (!o.no_escape) text = text::process_escapes(text);

  const auto t0 = clock::now();
  const auto file = gguf::File::open(o.model);
  const auto tokenizer = text::Tokenizer::from_gguf(*file);
  const auto t1 = clock::now();
  // As llama-tokenize: --no-bos turns add_special off altogether.
  const std::vector<text::TokenId> ids = tokenizer->encode(text, !o.no_bos, !o.no_parse_special);
  const auto t2 = clock::now();

  std::string out;
  out.reserve(ids.size() * 16 + 64);
  if (o.ids) {
    out += '[';
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ", ";
      fmt::format_to(std::back_inserter(out), "{}", ids[i]);
    }
    out += "]\n";
  } else {
    for (text::TokenId id : ids) {
      // llama-tokenize prints the piece as a C string, so a NUL byte ends it.
      const std::string& piece = tokenizer->piece(id, true);
      fmt::format_to(std::back_inserter(out), "{:6} -> '{}'\n", id,
                     std::string_view(piece.c_str()));
    }
  }
  if (o.show_count)
    fmt::format_to(std::back_inserter(out), "Total number of tokens: {}\n", ids.size());
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  if (o.timings) {
    const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    fmt::print(stderr, "load {:.1f} ms, tokenize {:.1f} ms ({} bytes -> {} tokens)\n", ms(t1 - t0),
               ms(t2 - t1), text.size(), ids.size());
  }
}

void setup(CLI::App& sub) {
  auto o = std::make_shared<TokenizeOptions>();
  sub.add_option("-m,--model", o->model, "GGUF file (a model or a vocabulary-only file)")
      ->required();
  auto* p = sub.add_option("-p,--prompt", o->prompt, "text to tokenize");
  auto* f = sub.add_option("-f,--file", o->file, "read the text from FILE");
  auto* s = sub.add_flag("--stdin", o->use_stdin, "read the text from standard input");
  p->excludes(f)->excludes(s);
  f->excludes(s);
  sub.add_flag("--ids", o->ids, "print only the ids, as a list: [2, 9259, ...]");
  sub.add_flag("--no-bos", o->no_bos, "do not add BOS (or EOS) even if the vocabulary asks for it");
  sub.add_flag("--no-parse-special", o->no_parse_special,
               "treat control-token text such as <|turn> as plain text");
  sub.add_flag("--show-count", o->show_count, "print the number of tokens at the end");
  sub.add_flag("--no-escape", o->no_escape, "do not process \\n, \\t, \\xHH ... escapes");
  sub.add_flag("--timings", o->timings, "print load and tokenize times to stderr");
  sub.callback([o, p, f, s] {
    if (p->count() == 0 && f->count() == 0 && s->count() == 0) {
      fail("tokenize: give the text with -p TEXT, -f FILE or --stdin");
    }
    run(*o);
  });
}

}  // namespace

BOLTRT_COMMAND(tokenize, "Print the token ids of a text (like llama-tokenize)", setup);

}  // namespace boltrt::cli
