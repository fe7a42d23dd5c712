#include "support/gemma4_golden.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
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

void expect_matches(const Golden& g, const std::vector<float>& logits, double tol,
                    const std::string& mode, bool moe_quantized) {
  const int64_t V = g.n_vocab;
  double worst = 0;
  int64_t outliers = 0;  // positions over tol or with a different clear argmax
  for (size_t r = 0; r < g.positions.size(); ++r) {
    const uint32_t pos = g.positions[r];
    const float* ref = g.logits.data() + r * static_cast<size_t>(V);
    const float* got = logits.data() + static_cast<size_t>(pos) * static_cast<size_t>(V);
    double max_ref = 0, max_diff = 0;
    int64_t arg_ref = 0, arg_got = 0;
    for (int64_t v = 0; v < V; ++v) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[v])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(ref[v]) - got[v]));
      if (ref[v] > ref[arg_ref]) arg_ref = v;
      if (got[v] > got[arg_got]) arg_got = v;
    }
    const double rel = max_diff / max_ref;
    worst = std::max(worst, rel);
    double second = -1e30;
    for (int64_t v = 0; v < V; ++v) {
      if (v != arg_ref) second = std::max(second, static_cast<double>(ref[v]));
    }
    const bool clear_argmax = ref[arg_ref] - second > tol * max_ref;
    if (moe_quantized) {
      EXPECT_LE(rel, 0.5) << mode << ": position " << pos;
      if (rel > tol || (clear_argmax && arg_got != arg_ref)) ++outliers;
      continue;
    }
    EXPECT_LE(rel, tol) << mode << ": position " << pos;
    if (clear_argmax) {
      EXPECT_EQ(arg_got, arg_ref) << mode << ": position " << pos;
    }
  }
  if (moe_quantized) {
    EXPECT_LE(outliers * 10, static_cast<int64_t>(g.positions.size())) << mode;
  }
  std::printf("  %-14s worst max|dlogit| / max|logit| = %.2e, outliers %lld\n", mode.c_str(), worst,
              static_cast<long long>(outliers));
}

}  // namespace boltrt::test
