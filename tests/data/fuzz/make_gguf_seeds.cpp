// Writes the seed corpus of fuzz/fuzz_gguf.cpp (tests/data/fuzz/fuzz_gguf/) with boltrt's own
// GGUF writer. Not built by CMake; from the repository root, after building boltrt_core:
//   g++ -std=c++20 -Isrc tests/data/fuzz/make_gguf_seeds.cpp build/<dir>/libboltrt_core.a \
//       -lfmt -lpthread -o /tmp/make_gguf_seeds && /tmp/make_gguf_seeds tests/data/fuzz/fuzz_gguf
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/synth_vocab.h"

using boltrt::GgmlType;
using boltrt::gguf::Writer;

static void save(const std::string& dir, const std::string& name, std::vector<uint8_t> bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  std::printf("%s: %zu bytes\n", name.c_str(), bytes.size());
}

static void add_values(Writer& w) {
  w.set_string("general.architecture", "test");
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", 1ull << 63);
  w.set_i64("t.i64", -(1ll << 62));
  w.set_f32("t.f32", 0.5f);
  w.set_f64("t.f64", -2.25);
  w.set_bool("t.bool", true);
  w.set_array_string("t.strs", {"a", "", "\xe2\x96\x81hello"});
  w.set_array_i32("t.i32s", std::vector<int32_t>{1, -2, 3});
  w.set_array_bool("t.bools", {true, false});
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  {
    Writer w;
    save(dir, "empty.seed", w.write_to_memory());
  }
  {
    Writer w;
    add_values(w);
    save(dir, "values.seed", w.write_to_memory());
  }
  static const uint8_t payload[4096] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (uint32_t alignment : {1u, 32u}) {
    Writer w(alignment);
    add_values(w);
    w.add_tensor_data("f32", GgmlType::F32, std::vector<int64_t>{4, 2}, payload);
    w.add_tensor_data("f16", GgmlType::F16, std::vector<int64_t>{3}, payload);
    w.add_tensor_data("q4_0", GgmlType::Q4_0, std::vector<int64_t>{32, 2}, payload);
    w.add_tensor_data("q8_0", GgmlType::Q8_0, std::vector<int64_t>{32, 1, 2}, payload);
    w.add_tensor_data("q4_K", GgmlType::Q4_K, std::vector<int64_t>{256}, payload);
    w.add_tensor_data("i8.4d", GgmlType::I8, std::vector<int64_t>{2, 2, 2, 2}, payload);
    w.add_tensor_data("empty", GgmlType::F32, std::vector<int64_t>{4, 0}, payload);
    save(dir, "tensors-align" + std::to_string(alignment) + ".seed", w.write_to_memory());
  }
  {
    Writer w;
    w.set_string("general.architecture", "gemma4");
    w.set_u32("gemma4.block_count", 2);
    w.set_array_bool("gemma4.attention.sliding_window_pattern", {true, false});
    boltrt::model::SynthVocab v = boltrt::model::build_synth_vocab(0);
    v.tokens.resize(300), v.scores.resize(300), v.token_types.resize(300);
    boltrt::model::write_synth_vocab(w, v);
    w.add_tensor_data("token_embd.weight", GgmlType::F32, std::vector<int64_t>{4, 2}, payload);
    auto bytes = w.write_to_memory();
    save(dir, "gemma4-vocab.seed", bytes);
    bytes[4] = 2;  // the same file as version 2
    save(dir, "gemma4-vocab-v2.seed", bytes);
  }
  return 0;
}
