#include "support/gemma4_golden.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace boltrt::test {

Golden read_golden(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  char magic[4];
  uint32_t header[4];
  in.read(magic, 4);
  in.read(reinterpret_cast<char*>(header), sizeof header);
  if (std::memcmp(magic, "G4GL", 4) != 0 || header[0] != 2) {
    throw std::runtime_error("bad golden " + path);
  }
  Golden g;
  in.read(reinterpret_cast<char*>(&g.model_hash), sizeof g.model_hash);
  g.tokens.resize(header[1]);
  g.n_vocab = header[2];
  g.positions.resize(header[3]);
  g.logits.resize(static_cast<size_t>(header[3]) * header[2]);
  in.read(reinterpret_cast<char*>(g.tokens.data()),
          static_cast<std::streamsize>(g.tokens.size() * 4));
  in.read(reinterpret_cast<char*>(g.positions.data()),
          static_cast<std::streamsize>(g.positions.size() * 4));
  in.read(reinterpret_cast<char*>(g.logits.data()),
          static_cast<std::streamsize>(g.logits.size() * 4));
  if (!in) throw std::runtime_error("truncated golden " + path);
  return g;
}

uint64_t fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(1 << 20);
  uint64_t h = 0xCBF29CE484222325ull;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h = (h ^ static_cast<uint8_t>(buffer[static_cast<size_t>(i)])) * 0x100000001B3ull;
    }
  }
  return h;
}

// The synthesizer must reproduce the golden's model byte for byte; when it changes on purpose,
// the goldens are remade with tests/data/gemma4/make_goldens.sh.
void expect_same_model(const Golden& g, const std::string& path) {
  ASSERT_EQ(fnv1a64(path), g.model_hash)
      << path << " differs from the model the golden was made from (did the synthesizer change?"
      << " then rerun tests/data/gemma4/make_goldens.sh)";
}

}  // namespace boltrt::test
