// Writer -> reader round trips: every value type, tensors of several types and alignments,
// streamed payloads, atomic writes and their failures, a 10^5-tensor file, and llama.cpp's own
// reader (llama-gguf) on a file we wrote.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "support/paths.h"
#include "util/error.h"

namespace boltrt::gguf {
namespace {

Value make(ValueType t, std::variant<uint64_t, int64_t, double, bool, std::string, Array> d) {
  Value v;
  v.type = t;
  v.data = std::move(d);
  return v;
}

Value array(ValueType elem, std::vector<Value> items) {
  return make(ValueType::ARRAY, Array{elem, std::move(items)});
}

// Exact comparison, including the declared type of every nested element and float bits.
void expect_same(const Value& a, const Value& b, const std::string& where) {
  ASSERT_EQ(a.type, b.type) << where;
  ASSERT_EQ(a.data.index(), b.data.index()) << where;
  if (const Array* x = a.as_array()) {
    const Array* y = b.as_array();
    ASSERT_EQ(x->type, y->type) << where;
    ASSERT_EQ(x->items.size(), y->items.size()) << where;
    for (size_t i = 0; i < x->items.size(); ++i) {
      expect_same(x->items[i], y->items[i], fmt::format("{}[{}]", where, i));
    }
  } else if (const auto* d = std::get_if<double>(&a.data)) {
    double e = std::get<double>(b.data);
    EXPECT_EQ(std::memcmp(d, &e, sizeof e), 0) << where << ": " << *d << " vs " << e;
  } else if (const auto* u = std::get_if<uint64_t>(&a.data)) {
    EXPECT_EQ(*u, std::get<uint64_t>(b.data)) << where;
  } else if (const auto* i = std::get_if<int64_t>(&a.data)) {
    EXPECT_EQ(*i, std::get<int64_t>(b.data)) << where;
  } else if (const auto* flag = std::get_if<bool>(&a.data)) {
    EXPECT_EQ(*flag, std::get<bool>(b.data)) << where;
  } else {
    EXPECT_EQ(*a.as_string(), *b.as_string()) << where;
  }
}

std::vector<KeyValue> every_value_type() {
  using VT = ValueType;
  std::vector<KeyValue> kv;
  auto add = [&](std::string k, Value v) { kv.push_back({std::move(k), std::move(v), 0}); };
  add("t.u8", make(VT::UINT8, uint64_t{255}));
  add("t.i8", make(VT::INT8, int64_t{-128}));
  add("t.u16", make(VT::UINT16, uint64_t{65535}));
  add("t.i16", make(VT::INT16, int64_t{-32768}));
  add("t.u32", make(VT::UINT32, uint64_t{4294967295u}));
  add("t.i32", make(VT::INT32, int64_t{-2147483647 - 1}));
  add("t.u64", make(VT::UINT64, std::numeric_limits<uint64_t>::max()));
  add("t.i64", make(VT::INT64, std::numeric_limits<int64_t>::min()));
  add("t.f32", make(VT::FLOAT32, double{-1.5e-45f}));  // a float32 subnormal
  add("t.f32_inf", make(VT::FLOAT32, -std::numeric_limits<double>::infinity()));
  add("t.f64", make(VT::FLOAT64, 0.1));
  add("t.f64_negzero", make(VT::FLOAT64, -0.0));
  add("t.bool_true", make(VT::BOOL, true));
  add("t.bool_false", make(VT::BOOL, false));
  add("t.str", make(VT::STRING, std::string("h\xc3\xa9llo \xe2\x96\x81 w\0rld", 16)));
  add("t.str_empty", make(VT::STRING, std::string()));
  add("t.arr_empty", array(VT::UINT32, {}));
  add("t.arr_i32", array(VT::INT32, {make(VT::INT32, int64_t{-1}), make(VT::INT32, int64_t{7})}));
  add("t.arr_u8", array(VT::UINT8, {make(VT::UINT8, uint64_t{0}), make(VT::UINT8, uint64_t{200})}));
  add("t.arr_f32", array(VT::FLOAT32, {make(VT::FLOAT32, 0.25), make(VT::FLOAT32, -3.0)}));
  add("t.arr_f64", array(VT::FLOAT64, {make(VT::FLOAT64, 1e300)}));
  add("t.arr_u64", array(VT::UINT64, {make(VT::UINT64, uint64_t{1} << 63)}));
  add("t.arr_i64", array(VT::INT64, {make(VT::INT64, int64_t{-5})}));
  add("t.arr_i16", array(VT::INT16, {make(VT::INT16, int64_t{-300})}));
  add("t.arr_u16", array(VT::UINT16, {make(VT::UINT16, uint64_t{300})}));
  add("t.arr_i8", array(VT::INT8, {make(VT::INT8, int64_t{-3})}));
  add("t.arr_u32", array(VT::UINT32, {make(VT::UINT32, uint64_t{3})}));
  add("t.arr_bool", array(VT::BOOL, {make(VT::BOOL, true), make(VT::BOOL, false)}));
  add("t.arr_str",
      array(VT::STRING, {make(VT::STRING, std::string("a")), make(VT::STRING, std::string()),
                         make(VT::STRING, std::string("\xe2\x96\x81the"))}));
  // Nested arrays (gguf-py writes them; llama.cpp itself rejects them).
  add("t.nested", array(VT::ARRAY, {array(VT::INT32, {make(VT::INT32, int64_t{1})}),
                                    array(VT::STRING, {make(VT::STRING, std::string("x"))}),
                                    array(VT::ARRAY, {array(VT::UINT8, {})})}));
  return kv;
}

TEST(GgufRoundTrip, EveryValueType) {
  Writer w;
  auto kvs = every_value_type();
  for (const KeyValue& kv : kvs) w.set(kv.key, kv.value);
  auto bytes = w.write_to_memory();
  EXPECT_EQ(bytes.size(), w.file_size());
  auto f = File::parse(bytes, "values.gguf");
  EXPECT_EQ(f->version(), 3u);
  ASSERT_EQ(f->metadata().size(), kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(f->metadata()[i].key, kvs[i].key);
    expect_same(f->metadata()[i].value, kvs[i].value, kvs[i].key);
    const Value* found = f->find(kvs[i].key);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found, &f->metadata()[i].value);
  }
  EXPECT_EQ(f->data_offset(), bytes.size());  // metadata-only: padded, nothing after
  EXPECT_EQ(f->data_offset() % 32, 0u);
}

TEST(GgufRoundTrip, TypedGetters) {
  Writer w;
  w.set_string("general.architecture", "gemma4");
  w.set_u32("gemma4.block_count", 42);
  w.set_f32("gemma4.rope.freq_base", 1e6f);
  w.set_bool("flag", true);
  w.set_u64("big", std::numeric_limits<uint64_t>::max());
  w.set_array_i32("arr", std::vector<int32_t>{1, 2});
  auto f = File::parse(w.write_to_memory(), "getters.gguf");
  EXPECT_EQ(f->architecture(), "gemma4");
  EXPECT_EQ(f->get_arch_int("block_count"), 42);
  EXPECT_EQ(f->get_arch_float("rope.freq_base"), 1e6);
  EXPECT_EQ(f->get_float("gemma4.block_count"), 42.0);
  EXPECT_EQ(f->get_bool("flag"), true);
  EXPECT_EQ(f->get_int("missing"), std::nullopt);
  EXPECT_EQ(f->get_array("arr")->items.size(), 2u);
  EXPECT_EQ(f->get_array("missing"), nullptr);
  try {
    f->get_int("general.architecture");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "getters.gguf: key 'general.architecture': has type string, expected an integer");
  }
  EXPECT_THROW(f->get_int("big"), Error);  // does not fit int64
  EXPECT_THROW(f->get_string("flag"), Error);
  EXPECT_THROW(f->get_bool("arr"), Error);
  EXPECT_THROW(f->get_array("flag"), Error);
}

struct TestTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};

std::vector<TestTensor> test_tensors() {
  std::vector<TestTensor> ts = {
      {"f32.vec", GgmlType::F32, {5}, {}},         {"f16.mat", GgmlType::F16, {3, 7}, {}},
      {"q4_0.3d", GgmlType::Q4_0, {64, 2, 3}, {}}, {"q8_0.4d", GgmlType::Q8_0, {32, 1, 2, 2}, {}},
      {"q4_K.mat", GgmlType::Q4_K, {256, 3}, {}},  {"i8.empty", GgmlType::I8, {4, 0}, {}},
      {"bf16.one", GgmlType::BF16, {1}, {}},
  };
  uint32_t x = 12345;
  for (TestTensor& t : ts) {
    int64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    t.bytes.resize(row_size(t.type, t.ne[0]) * static_cast<size_t>(rows));
    for (uint8_t& b : t.bytes) b = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  }
  return ts;
}

TEST(GgufRoundTrip, TensorsAtEveryAlignment) {
  for (uint32_t alignment : {1u, 32u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    auto ts = test_tensors();
    Writer w(alignment);
    w.set_string("general.architecture", "test");
    for (const TestTensor& t : ts) {
      // Streamed in 3-byte chunks to exercise the sink.
      w.add_tensor(t.name, t.type, t.ne, [&t](TensorSink& sink) {
        for (size_t i = 0; i < t.bytes.size(); i += 3) {
          sink.write(t.bytes.data() + i, std::min<size_t>(3, t.bytes.size() - i));
        }
      });
    }
    auto bytes = w.write_to_memory();
    ASSERT_EQ(bytes.size(), w.file_size());
    auto f = File::parse(bytes, "tensors.gguf");
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->data_offset(), w.data_offset());
    EXPECT_EQ(f->get_int("general.alignment").has_value(), alignment != 32);
    ASSERT_EQ(f->tensors().size(), ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      const TensorInfo& info = f->tensors()[i];
      EXPECT_EQ(info.name, ts[i].name);
      EXPECT_EQ(info.type, ts[i].type);
      EXPECT_EQ(info.n_dims, ts[i].ne.size());
      for (size_t d = 0; d < 4; ++d) {
        EXPECT_EQ(info.ne[d], d < ts[i].ne.size() ? ts[i].ne[d] : 1) << info.name;
      }
      EXPECT_EQ(info.nbytes, ts[i].bytes.size());
      EXPECT_EQ(info.offset % alignment, 0u);
      EXPECT_EQ(f->find_tensor(ts[i].name), &info);
      if (!ts[i].bytes.empty()) {
        EXPECT_EQ(std::memcmp(f->tensor_data(info), ts[i].bytes.data(), ts[i].bytes.size()), 0)
            << info.name;
      }
    }
    EXPECT_EQ(f->find_tensor("nope"), nullptr);
    // In-memory images are copied to 64-byte aligned storage, so tensor data is aligned as in
    // a mapping.
    if (alignment >= 32) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(f->tensor_data(f->tensors()[1])) % 32, 0u);
    }
  }
}

TEST(GgufRoundTrip, FileWriteMatchesMemoryAndMapsBack) {
  auto dir = test::scratch_dir("gguf_roundtrip_file");
  auto ts = test_tensors();
  Writer w;
  w.set_string("general.architecture", "test");
  for (const TestTensor& t : ts) w.add_tensor_data(t.name, t.type, t.ne, t.bytes.data());
  std::string path = dir + "/model.gguf";
  w.write(path);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> disk((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(disk, w.write_to_memory());
  auto f = File::open(path);
  EXPECT_EQ(f->file_size(), disk.size());
  EXPECT_EQ(f->path(), path);
  const TensorInfo* q = f->find_tensor("q4_K.mat");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->tensor_data(*q)) % 32, 0u);
  // Nothing but the target is left in the directory (the temporary was renamed).
  size_t entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1u);
}

TEST(GgufRoundTrip, ProducerByteCountIsChecked) {
  auto dir = test::scratch_dir("gguf_roundtrip_producer");
  std::string path = dir + "/short.gguf";
  {
    Writer w;
    w.add_tensor("t", GgmlType::F32, {4}, [](TensorSink& sink) {
      float v[3] = {1, 2, 3};
      sink.write(v, sizeof v);
    });
    try {
      w.write(path);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "gguf writer: tensor 't': producer wrote 12 of its 16 bytes");
    }
  }
  {
    Writer w;
    w.add_tensor("u", GgmlType::F32, {2}, [](TensorSink& sink) {
      float v[3] = {1, 2, 3};
      sink.write(v, sizeof v);
    });
    EXPECT_THROW(w.write(path), Error);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "temporary left behind";
}

TEST(GgufRoundTrip, FailedWriteKeepsTheOldFile) {
  auto dir = test::scratch_dir("gguf_roundtrip_atomic");
  std::string path = dir + "/m.gguf";
  Writer good;
  good.set_u32("v", 1);
  good.write(path);
  auto before = File::open(path)->file_size();
  Writer bad;
  bad.set_u32("v", 2);
  bad.add_tensor("t", GgmlType::F32, {4}, [](TensorSink&) { fail("producer exploded"); });
  EXPECT_THROW(bad.write(path), Error);
  auto f = File::open(path);
  EXPECT_EQ(f->file_size(), before);
  EXPECT_EQ(f->get_int("v"), 1);
}

TEST(GgufRoundTrip, FullDiskIsOneClearError) {
  int fd = ::open("/dev/full", O_WRONLY);
  if (fd < 0) GTEST_SKIP() << "/dev/full is not available on this machine";
  Writer w;
  std::vector<float> data(1 << 20, 1.0f);  // 4 MiB: larger than the writer's buffer
  w.add_tensor_data("t", GgmlType::F32, std::vector<int64_t>{1 << 20}, data.data());
  try {
    w.write_fd(fd, "full.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "full.gguf: write failed after 0 bytes: No space left on device");
  }
  ::close(fd);
}

TEST(GgufRoundTrip, DevicesAreWrittenDirectly) {
  if (!std::filesystem::is_character_file("/dev/null")) GTEST_SKIP() << "no /dev/null here";
  Writer w;
  w.set_u32("v", 1);
  EXPECT_NO_THROW(w.write("/dev/null"));
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

TEST(GgufRoundTrip, UnwritableDirectory) {
  Writer w;
  try {
    w.write("/nonexistent-dir-boltrt/x.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("/nonexistent-dir-boltrt/x.gguf.tmp-"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot create: No such file or directory"), std::string::npos) << msg;
  }
}

TEST(GgufRoundTrip, WriterRejectsBadInput) {
  Writer w;
  EXPECT_THROW(w.set_u32("", 1), Error);
  EXPECT_THROW(w.set_u32("bad\nkey", 1), Error);
  EXPECT_THROW(w.set_u16("general.alignment", 32), Error);
  EXPECT_THROW(Writer(48), Error);
  EXPECT_THROW(w.add_tensor("x", GgmlType::Q4_0, {33}, nullptr), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), GgmlType::F32, {1}, nullptr), Error);
  EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {1, 1, 1, 1, 1}, nullptr), Error);
  EXPECT_THROW(w.add_tensor("x", static_cast<GgmlType>(4), {32}, nullptr), Error);
  w.add_tensor("x", GgmlType::F32, {1}, nullptr);
  EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {1}, nullptr), Error);
  Value wrong;
  wrong.type = ValueType::STRING;
  wrong.data = uint64_t{1};
  EXPECT_THROW(w.set("k", wrong), Error);
  // Re-setting a key replaces its value in place.
  Writer r;
  r.set_u32("a", 1);
  r.set_u32("b", 2);
  r.set_string("a", "x");
  auto f = File::parse(r.write_to_memory(), "replace.gguf");
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].key, "a");
  EXPECT_EQ(f->get_string("a"), "x");
}

TEST(GgufRoundTrip, HundredThousandTensorsParseInLinearTime) {
  // gguf.cpp's pairwise duplicate scan makes this quadratic (gguf.md §9 F); ours hashes.
  const int n = 100000;
  Writer w2;
  static const float one = 1.0f;
  for (int i = 0; i < n; ++i) {
    w2.add_tensor_data(fmt::format("t{}", i), GgmlType::F32, std::vector<int64_t>{1}, &one);
  }
  auto bytes = w2.write_to_memory();
  auto f = File::parse(bytes, "many.gguf");
  ASSERT_EQ(f->tensors().size(), static_cast<size_t>(n));
  const TensorInfo* last = f->find_tensor("t99999");
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->offset, uint64_t{99999} * 32);
  float v;
  std::memcpy(&v, f->tensor_data(*last), 4);
  EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(w2.tensor_count(), static_cast<size_t>(n));
}

TEST(GgufRoundTrip, LlamaCppReadsOurFile) {
  std::string bin = test::llama_ref_bin();
  if (bin.empty()) {
    GTEST_SKIP()
        << "llama-ref is not built (shared/tools/llama-ref/build.sh); cannot run llama-gguf";
  }
  auto dir = test::scratch_dir("gguf_roundtrip_llama");
  std::string path = dir + "/ours.gguf";
  Writer w;
  w.set_string("general.architecture", "test");
  w.set_array_string("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.set_array_f32("floats", std::vector<float>{1.5f, 2.5f});
  std::vector<float> data = {0.5f, 1.25f, -2.0f, 3.0f, 4.0f, 5.0f};
  w.add_tensor_data("weights.one", GgmlType::F32, std::vector<int64_t>{3, 2}, data.data());
  w.add_tensor_data("weights.two", GgmlType::F32, std::vector<int64_t>{6}, data.data());
  w.write(path);
  std::string out;
  int rc = test::run_command("LD_LIBRARY_PATH=" + bin + " " + bin + "/llama-gguf " + path + " r n",
                             &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("n_kv: 3"), std::string::npos) << out;
  EXPECT_NE(out.find("key = tokenizer.ggml.tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("n_tensors: 2"), std::string::npos) << out;
  EXPECT_NE(out.find("name = weights.one"), std::string::npos) << out;
  EXPECT_NE(out.find("weights.two data[:10] : 0.500000 1.250000 -2.000000 3.000000 4.000000 "
                     "5.000000"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace boltrt::gguf
