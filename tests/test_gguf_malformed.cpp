// Malformed GGUF files, one defect each (shared/docs/gguf.md §8, §9, §14): every one must be
// rejected with one boltrt::Error naming the field and the byte offset, never a crash.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "gguf/gguf.h"
#include "gguf_support/raw_gguf.h"
#include "util/error.h"

namespace boltrt::gguf {
namespace {

using test::Bytes;
using test::kv_string;
using test::kv_u32;
using test::RawFile;
using test::RawKv;
using test::RawTensor;

// A small valid file: two KVs, two F32 tensors.
RawFile base() {
  RawFile f;
  f.kvs.push_back(kv_string("general.architecture", "test"));
  f.kvs.push_back(kv_u32("test.block_count", 7));
  f.tensors.push_back(RawTensor{"a", 1, {8}, 0, {}, 0});
  f.tensors.push_back(RawTensor{"b", 2, {4, 2}, 0, {}, 0});
  return f;
}

// Field positions inside a KV entry / tensor record starting at `at`.
size_t kv_type_at(size_t at, const std::string& key) {
  return at + 8 + key.size();
}
size_t kv_value_at(size_t at, const std::string& key) {
  return at + 12 + key.size();
}
size_t t_ndims_at(size_t at, const std::string& name) {
  return at + 8 + name.size();
}
size_t t_ne_at(size_t at, const std::string& name, int d) {
  return at + 12 + name.size() + 8 * d;
}
size_t t_type_at(size_t at, const std::string& name, int nd) {
  return at + 12 + name.size() + 8 * nd;
}
size_t t_offset_at(size_t at, const std::string& name, int nd) {
  return at + 16 + name.size() + 8 * nd;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    File::parse(bytes, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("NOT A boltrt::Error: ") + e.what();
  }
  return "accepted";
}

// Asserts the one-line error "bad.gguf: at byte N: FIELD...: ...PROBLEM...".
void expect_error(const std::vector<uint8_t>& bytes, size_t at, const std::string& field,
                  const std::string& problem) {
  std::string e = parse_error(bytes);
  std::string prefix = "bad.gguf: at byte " + std::to_string(at) + ": " + field;
  EXPECT_EQ(e.rfind(prefix, 0), 0u) << "error: " << e << "\nexpected prefix: " << prefix;
  EXPECT_NE(e.find(problem), std::string::npos) << "error: " << e << "\nexpected: " << problem;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "error spans lines: " << e;
}

TEST(GgufMalformed, BaseFileIsValid) {
  RawFile f = base();
  auto file = File::parse(f.build(), "ok.gguf");
  EXPECT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->data_offset(), f.data_offset);
}

// ---- header ---------------------------------------------------------------------------------

TEST(GgufMalformed, EmptyFile) {
  expect_error({}, 0, "magic", "0 bytes, too short");
}
TEST(GgufMalformed, ThreeBytes) {
  expect_error({'G', 'G', 'U'}, 0, "magic", "3 bytes");
}

TEST(GgufMalformed, BadMagic) {
  RawFile f = base();
  f.magic = "FUGG";
  expect_error(f.build(), 0, "magic", "expected \"GGUF\", found \"FUGG\"");
}

TEST(GgufMalformed, BadMagicNonPrintable) {
  RawFile f = base();
  f.magic = std::string("G\x01U\xff", 4);
  expect_error(f.build(), 0, "magic", "found \"G\\x01U\\xff\"");
}

TEST(GgufMalformed, Version0) {
  RawFile f = base();
  f.version = 0;
  expect_error(f.build(), 4, "version", "version 0 is invalid");
}

TEST(GgufMalformed, Version1) {
  RawFile f = base();
  f.version = 1;
  expect_error(f.build(), 4, "version", "v1");
}

TEST(GgufMalformed, VersionFuture) {
  RawFile f = base();
  f.version = 4;
  expect_error(f.build(), 4, "version", "version 4 is newer");
}

TEST(GgufMalformed, ByteSwapped) {
  RawFile f = base();
  f.version = 0x03000000;
  expect_error(f.build(), 4, "version", "big-endian");
}

TEST(GgufMalformed, NegativeTensorCount) {
  RawFile f = base();
  f.tensor_count = ~uint64_t{0};
  expect_error(f.build(), 8, "tensor_count", "negative");
}

TEST(GgufMalformed, NegativeKvCount) {
  RawFile f = base();
  f.kv_count = ~uint64_t{0};
  expect_error(f.build(), 16, "kv_count", "negative");
}

TEST(GgufMalformed, KvCountBeyondFile) {
  RawFile f = base();
  f.kv_count = 1000000;
  expect_error(f.build(), 16, "kv_count", "1000000 entries cannot fit");
}

TEST(GgufMalformed, TensorCountBeyondFile) {
  RawFile f = base();
  f.tensor_count = uint64_t{1} << 40;
  expect_error(f.build(), 8, "tensor_count", "cannot fit");
}

TEST(GgufMalformed, TruncatedHeader) {
  RawFile f = base();
  auto bytes = f.build();
  bytes.resize(20);
  expect_error(bytes, 16, "kv_count", "needs 8 bytes but the file ends after 4");
}

// ---- key/value entries ----------------------------------------------------------------------

TEST(GgufMalformed, KeyLengthAllOnes) {
  Bytes b;
  b.raw("GGUF").u32(3).u64(0).u64(1).u64(~uint64_t{0}).zeros(16);
  expect_error(b.data, 24, "key #0", "exceeds the 1 GiB limit");
}

TEST(GgufMalformed, KeyLengthPastEnd) {
  Bytes b;
  b.raw("GGUF").u32(3).u64(0).u64(1).u64(100).raw("short").zeros(8);
  expect_error(b.data, 24, "key #0", "string length 100 runs past the end");
}

TEST(GgufMalformed, EmptyKey) {
  RawFile f = base();
  f.kvs[1].key = "";
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[1], "key #1", "empty key");
}

TEST(GgufMalformed, KeyWithNul) {
  RawFile f = base();
  f.kvs[1].key = std::string("test.a\0b", 8);
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[1], "key #1", "byte 0x00");
}

TEST(GgufMalformed, KeyNotAscii) {
  RawFile f = base();
  f.kvs[1].key = "test.\xc3\xa9t\xc3\xa9";
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[1], "key #1", "byte 0xc3");
}

TEST(GgufMalformed, DuplicateKey) {
  RawFile f = base();
  f.kvs.push_back(kv_u32("test.block_count", 8));
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[2], "key 'test.block_count'", "duplicate key");
}

TEST(GgufMalformed, ValueType13) {
  RawFile f = base();
  f.kvs[1].type = 13;
  auto bytes = f.build();
  expect_error(bytes, kv_type_at(f.kv_offsets[1], f.kvs[1].key), "key 'test.block_count'",
               "invalid value type 13");
}

TEST(GgufMalformed, ArrayElementType13) {
  RawFile f = base();
  RawKv kv{"test.arr", 9, {}};
  kv.payload.u32(13).u64(1).u32(0);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  expect_error(bytes, kv_value_at(f.kv_offsets[2], "test.arr"), "key 'test.arr'",
               "invalid array element type 13");
}

TEST(GgufMalformed, ArrayCountOverLimit) {
  RawFile f = base();
  RawKv kv{"test.arr", 9, {}};
  kv.payload.u32(0).u64((uint64_t{1} << 30) + 1);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  expect_error(bytes, kv_value_at(f.kv_offsets[2], "test.arr") + 4, "key 'test.arr'",
               "exceeds the 2^30 limit");
}

TEST(GgufMalformed, ArrayPastEnd) {
  RawFile f = base();
  RawKv kv{"test.arr", 9, {}};
  kv.payload.u32(4).u64(1000000).u32(1);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  expect_error(bytes, kv_value_at(f.kv_offsets[2], "test.arr") + 4, "key 'test.arr'",
               "array of 1000000 uint32 elements needs at least 4000000 bytes");
}

TEST(GgufMalformed, StringArrayPastEnd) {
  RawFile f = base();
  RawKv kv{"test.strs", 9, {}};
  kv.payload.u32(8).u64(100000).str("x");
  f.kvs.push_back(kv);
  auto bytes = f.build();
  expect_error(bytes, kv_value_at(f.kv_offsets[2], "test.strs") + 4, "key 'test.strs'",
               "array of 100000 string elements");
}

TEST(GgufMalformed, StringElementPastEnd) {
  RawFile f = base();
  RawKv kv{"test.strs", 9, {}};
  kv.payload.u32(8).u64(2).str("ok").u64(5000);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  size_t at = kv_value_at(f.kv_offsets[2], "test.strs") + 12 + 10;
  expect_error(bytes, at, "key 'test.strs'", "string length 5000 runs past the end");
}

TEST(GgufMalformed, StringValuePastEnd) {
  Bytes b;
  b.raw("GGUF").u32(3).u64(0).u64(1).str("k").u32(8).u64(64).raw("abc");
  expect_error(b.data, 24 + 9 + 4, "key 'k'", "string length 64 runs past the end");
}

TEST(GgufMalformed, ArrayNestedTooDeep) {
  RawFile f = base();
  RawKv kv{"test.deep", 9, {}};
  for (int level = 0; level < 5; ++level) kv.payload.u32(9).u64(1);
  kv.payload.u32(0).u64(0);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  // The entry at depth 3 (the 4th nested array header) is the one that goes too deep.
  size_t at = kv_value_at(f.kv_offsets[2], "test.deep") + 3 * 12;
  expect_error(bytes, at, "key 'test.deep'", "nested deeper than 4 levels");
}

TEST(GgufMalformed, BoolNotZeroOrOne) {
  RawFile f = base();
  RawKv kv{"test.flag", 7, {}};
  kv.payload.u8(2);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  expect_error(bytes, kv_value_at(f.kv_offsets[2], "test.flag"), "key 'test.flag'",
               "bool value is 2");
}

TEST(GgufMalformed, BoolArrayElementNotZeroOrOne) {
  RawFile f = base();
  RawKv kv{"test.flags", 9, {}};
  kv.payload.u32(7).u64(3).u8(1).u8(0).u8(255);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  expect_error(bytes, kv_value_at(f.kv_offsets[2], "test.flags") + 14, "key 'test.flags'",
               "bool value is 255");
}

TEST(GgufMalformed, AlignmentWrongType) {
  RawFile f = base();
  RawKv kv{"general.alignment", 5, {}};
  kv.payload.i32(32);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[2], "key 'general.alignment'",
               "has type int32, expected uint32");
}

TEST(GgufMalformed, AlignmentNotPowerOfTwo) {
  RawFile f = base();
  f.kvs.push_back(kv_u32("general.alignment", 13));
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[2], "key 'general.alignment'", "13 is not a power of two");
}

TEST(GgufMalformed, AlignmentZero) {
  RawFile f = base();
  f.kvs.push_back(kv_u32("general.alignment", 0));
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[2], "key 'general.alignment'", "0 is not a power of two");
}

TEST(GgufMalformed, AlignmentHuge) {
  RawFile f = base();
  f.kvs.push_back(kv_u32("general.alignment", 1u << 31));
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[2], "key 'general.alignment'", "exceeds the 1 MiB limit");
}

TEST(GgufMalformed, ArchitectureNotString) {
  RawFile f = base();
  f.kvs[0] = kv_u32("general.architecture", 5);
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[0], "key 'general.architecture'",
               "has type uint32, expected string");
}

TEST(GgufMalformed, TokensNotStrings) {
  RawFile f = base();
  RawKv kv{"tokenizer.ggml.tokens", 9, {}};
  kv.payload.u32(5).u64(2).i32(1).i32(2);
  f.kvs.push_back(kv);
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[2], "key 'tokenizer.ggml.tokens'",
               "is an array of int32, expected an array of string");
}

TEST(GgufMalformed, SplitNoNotUint16) {
  RawFile f = base();
  f.kvs.push_back(kv_u32("split.no", 0));
  auto bytes = f.build();
  expect_error(bytes, f.kv_offsets[2], "key 'split.no'", "expected uint16");
}

// ---- tensor records -------------------------------------------------------------------------

TEST(GgufMalformed, EmptyTensorName) {
  RawFile f = base();
  f.tensors[1].name = "";
  auto bytes = f.build();
  expect_error(bytes, f.tensor_offsets[1], "tensor #1 name", "empty tensor name");
}

TEST(GgufMalformed, TensorNameTooLong) {
  RawFile f = base();
  f.tensors[1].name = std::string(64, 'n');
  auto bytes = f.build();
  expect_error(bytes, f.tensor_offsets[1], "tensor #1 name", "is 64 bytes, the limit is 63");
}

TEST(GgufMalformed, TensorNameWithNul) {
  RawFile f = base();
  f.tensors[1].name = std::string("b\0c", 3);
  auto bytes = f.build();
  expect_error(bytes, f.tensor_offsets[1], "tensor #1 name", "contains a NUL byte");
}

TEST(GgufMalformed, TensorNameNotUtf8) {
  RawFile f = base();
  f.tensors[1].name = "b\xff\xfe";
  auto bytes = f.build();
  expect_error(bytes, f.tensor_offsets[1], "tensor #1 name", "not valid UTF-8");
}

TEST(GgufMalformed, DuplicateTensorName) {
  RawFile f = base();
  f.tensors[1].name = "a";
  auto bytes = f.build();
  expect_error(bytes, f.tensor_offsets[1], "tensor 'a'", "duplicate tensor name");
}

TEST(GgufMalformed, TooManyDims) {
  RawFile f = base();
  f.tensors[1].n_dims = 5;
  f.tensors[1].ne = {1, 1, 1, 1, 8};
  auto bytes = f.build();
  expect_error(bytes, t_ndims_at(f.tensor_offsets[1], "b"), "tensor 'b' n_dims",
               "5 dimensions, must be 1 to 4");
}

TEST(GgufMalformed, ZeroDims) {
  RawFile f = base();
  f.tensors[1].n_dims = 0;
  f.tensors[1].nbytes = 4;
  auto bytes = f.build();
  expect_error(bytes, t_ndims_at(f.tensor_offsets[1], "b"), "tensor 'b' n_dims", "0 dimensions");
}

TEST(GgufMalformed, NegativeDim) {
  RawFile f = base();
  f.tensors[1].ne = {4, -2};
  f.tensors[1].nbytes = 32;
  auto bytes = f.build();
  expect_error(bytes, t_ne_at(f.tensor_offsets[1], "b", 1), "tensor 'b' ne[1]",
               "negative dimension -2");
}

TEST(GgufMalformed, ElementCountWrapsToZero) {
  // 2^32 x 2^32 F32: gguf.cpp's product wraps to 0 and accepts the tensor.
  RawFile f = base();
  f.tensors[1].ne = {int64_t{1} << 32, int64_t{1} << 32};
  f.tensors[1].nbytes = 32;
  auto bytes = f.build();
  expect_error(bytes, t_ne_at(f.tensor_offsets[1], "b", 1), "tensor 'b' ne[1]",
               "element count overflows 64 bits");
}

TEST(GgufMalformed, ElementCountWrapsNegative) {
  // 2^62 x 2 I8: the product is 2^63 (negative as int64 in gguf.cpp).
  RawFile f = base();
  f.tensors[1].ne = {int64_t{1} << 62, 2};
  f.tensors[1].type = 24;
  f.tensors[1].nbytes = 32;
  auto bytes = f.build();
  expect_error(bytes, t_ne_at(f.tensor_offsets[1], "b", 1), "tensor 'b' ne[1]",
               "element count overflows 64 bits");
}

TEST(GgufMalformed, ByteSizeOverflows) {
  // 2^61 I64 elements fit in int64, their 2^64 bytes do not.
  RawFile f = base();
  f.tensors[1].n_dims = 1;
  f.tensors[1].ne = {int64_t{1} << 61};
  f.tensors[1].type = 27;
  f.tensors[1].nbytes = 32;
  auto bytes = f.build();
  expect_error(bytes, t_type_at(f.tensor_offsets[1], "b", 1), "tensor 'b' type",
               "byte size overflows 64 bits");
}

TEST(GgufMalformed, UnknownTensorType) {
  RawFile f = base();
  f.tensors[1].type = 43;
  f.tensors[1].nbytes = 32;
  auto bytes = f.build();
  expect_error(bytes, t_type_at(f.tensor_offsets[1], "b", 2), "tensor 'b' type",
               "unknown tensor type id 43");
}

TEST(GgufMalformed, NegativeTensorType) {
  RawFile f = base();
  f.tensors[1].type = 0xffffffffu;
  f.tensors[1].nbytes = 32;
  auto bytes = f.build();
  expect_error(bytes, t_type_at(f.tensor_offsets[1], "b", 2), "tensor 'b' type",
               "unknown tensor type id 4294967295");
}

TEST(GgufMalformed, RemovedTensorTypeQ4_2) {
  RawFile f = base();
  f.tensors[1].type = 4;
  f.tensors[1].nbytes = 32;
  auto bytes = f.build();
  expect_error(bytes, t_type_at(f.tensor_offsets[1], "b", 2), "tensor 'b' type",
               "type id 4 (q4_2) was removed");
}

TEST(GgufMalformed, RemovedTensorTypeQ4_0_4_4) {
  RawFile f = base();
  f.tensors[1].type = 31;
  f.tensors[1].nbytes = 32;
  auto bytes = f.build();
  expect_error(bytes, t_type_at(f.tensor_offsets[1], "b", 2), "tensor 'b' type",
               "type id 31 (q4_0_4_4) was removed");
}

TEST(GgufMalformed, RowNotMultipleOfBlock) {
  RawFile f = base();
  f.tensors[1].ne = {33, 2};
  f.tensors[1].type = 2;  // Q4_0, block 32
  f.tensors[1].nbytes = 36;
  auto bytes = f.build();
  expect_error(bytes, t_type_at(f.tensor_offsets[1], "b", 2), "tensor 'b' type",
               "row length 33 is not a multiple of the q4_0 block size 32");
}

// ---- data placement -------------------------------------------------------------------------

TEST(GgufMalformed, MisalignedOffset) {
  RawFile f = base();
  f.tensors[1].offset = 33;
  auto bytes = f.build();
  expect_error(bytes, t_offset_at(f.tensor_offsets[1], "b", 2), "tensor 'b' offset",
               "data offset 33 is not a multiple of the alignment 32");
}

TEST(GgufMalformed, OverlappingTensors) {
  RawFile f = base();
  f.tensors[1].offset = 0;
  auto bytes = f.build();
  expect_error(bytes, t_offset_at(f.tensor_offsets[1], "b", 2), "tensor 'b' offset",
               "overlaps tensor 'a'");
}

TEST(GgufMalformed, GapBetweenTensors) {
  RawFile f = base();
  f.tensors[1].offset = 64;
  auto bytes = f.build();
  expect_error(bytes, t_offset_at(f.tensor_offsets[1], "b", 2), "tensor 'b' offset",
               "data offset 64 leaves a gap: expected 32");
}

TEST(GgufMalformed, FirstTensorNotAtZero) {
  RawFile f = base();
  f.tensors[0].offset = 32;
  auto bytes = f.build();
  expect_error(bytes, t_offset_at(f.tensor_offsets[0], "a", 1), "tensor 'a' offset",
               "leaves a gap: expected 0");
}

TEST(GgufMalformed, OffsetAllOnes) {
  RawFile f = base();
  f.tensors[1].offset = ~uint64_t{0};
  auto bytes = f.build();
  expect_error(bytes, t_offset_at(f.tensor_offsets[1], "b", 2), "tensor 'b' offset",
               "not a multiple of the alignment");
}

TEST(GgufMalformed, TensorDataPastEnd) {
  RawFile f = base();
  auto bytes = f.build();
  bytes.resize(f.data_offset + 32 + 16);  // 'b' needs 32 bytes at data offset 32
  expect_error(bytes, t_offset_at(f.tensor_offsets[1], "b", 2), "tensor 'b' offset",
               "runs past the end of the file");
}

TEST(GgufMalformed, HugeTensorsPastEnd) {
  // Two I8 tensors of 0x7FFF...FFC0 elements with only 32 data bytes (§14 MEM_SIZE_OVERFLOW).
  RawFile f = base();
  f.tensors.clear();
  f.tensors.push_back(RawTensor{"x", 1, {0x7FFFFFFFFFFFFFC0}, 24, uint64_t{0}, 32});
  f.tensors.push_back(
      RawTensor{"y", 1, {0x7FFFFFFFFFFFFFC0}, 24, uint64_t{0x7FFFFFFFFFFFFFC0}, 32});
  auto bytes = f.build();
  expect_error(bytes, t_offset_at(f.tensor_offsets[0], "x", 1), "tensor 'x' offset",
               "runs past the end of the file");
}

TEST(GgufMalformed, EndsInPaddingBeforeData) {
  RawFile f = base();
  auto bytes = f.build();
  size_t end_of_records = t_offset_at(f.tensor_offsets[1], "b", 2) + 8;
  ASSERT_LT(end_of_records, f.data_offset);
  bytes.resize(end_of_records + 1);
  expect_error(bytes, end_of_records, "data section", "before the 32-aligned data start");
}

TEST(GgufMalformed, InconsistentAlignment) {
  // Offsets computed with alignment 1, padding done with 32 (§14 INCONSISTENT_ALIGN).
  RawFile f = base();
  f.tensors[0].ne = {3};
  f.tensors[1].offset = 12;
  auto bytes = f.build();
  expect_error(bytes, t_offset_at(f.tensor_offsets[1], "b", 2), "tensor 'b' offset",
               "not a multiple of the alignment 32");
}

TEST(GgufMalformed, TruncatedTensorRecord) {
  RawFile f = base();
  auto bytes = f.build();
  size_t type_at = t_type_at(f.tensor_offsets[1], "b", 2);
  bytes.resize(type_at + 2);
  expect_error(bytes, type_at, "tensor 'b' type", "needs 4 bytes but the file ends after 2");
}

// ---- accepted edge cases (gguf.md §14) -------------------------------------------------------

TEST(GgufMalformed, AcceptsEmptyHeader) {
  Bytes b;
  b.raw("GGUF").u32(3).u64(0).u64(0);
  auto f = File::parse(b.data, "empty.gguf");
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufMalformed, AcceptsZeroSizedTensor) {
  RawFile f = base();
  f.tensors[1].ne = {4, 0};
  auto bytes = f.build();
  auto file = File::parse(bytes, "zero.gguf");
  EXPECT_EQ(file->tensors()[1].nbytes, 0u);
}

TEST(GgufMalformed, AcceptsCustomAlignmentUsedConsistently) {
  for (uint32_t a : {1u, 8u, 64u}) {
    RawFile f = base();
    f.kvs.push_back(kv_u32("general.alignment", a));
    f.alignment = a;
    f.tensors[0].ne = {3};
    auto file = File::parse(f.build(), "align.gguf");
    EXPECT_EQ(file->alignment(), a);
    EXPECT_EQ(file->data_offset(), f.data_offset);
    EXPECT_EQ(file->tensors()[1].offset, RawFile::align(12, a));
  }
}

TEST(GgufMalformed, AcceptsTrailingBytesAndMissingFinalPadding) {
  RawFile f = base();
  auto bytes = f.build();
  EXPECT_TRUE(File::parse(bytes, "clean.gguf")->warnings().empty());
  bytes.insert(bytes.end(), 100, 0xAB);
  auto trailing = File::parse(bytes, "trailing.gguf");
  ASSERT_EQ(trailing->warnings().size(), 1u);
  EXPECT_EQ(
      trailing->warnings()[0],
      fmt::format("100 bytes after the end of the tensor data (byte {})", bytes.size() - 100));
  RawFile g = base();
  g.tensors[1].ne = {3, 2};  // 24 bytes: 8 bytes of padding follow
  g.pad_after_last = false;
  auto unpadded = File::parse(g.build(), "unpadded.gguf");
  ASSERT_EQ(unpadded->warnings().size(), 1u);
  EXPECT_EQ(unpadded->warnings()[0],
            "the file ends 8 bytes short of the last tensor's padding (gguf.cpp's "
            "payload-loading mode rejects this)");
}

TEST(GgufMalformed, WarnsAboutNonZeroPaddingAndSmallAlignment) {
  RawFile f = base();
  auto bytes = f.build();
  bytes[f.data_offset - 1] = 0x55;  // inside the padding before the data
  auto file = File::parse(bytes, "pad.gguf");
  ASSERT_EQ(file->warnings().size(), 1u);
  EXPECT_EQ(file->warnings()[0].rfind("non-zero padding between byte", 0), 0u);
  RawFile h = base();
  h.tensors[0].ne = {3};  // 12 bytes, then 20 bytes of padding
  auto hb = h.build();
  hb[h.data_offset + 12 + 5] = 0x66;
  auto between = File::parse(hb, "pad2.gguf");
  ASSERT_EQ(between->warnings().size(), 1u);
  EXPECT_EQ(between->warnings()[0], "non-zero padding after tensor 'a'");
  RawFile g = base();
  g.kvs.push_back(kv_u32("general.alignment", 8));
  g.alignment = 8;
  auto small = File::parse(g.build(), "align8.gguf");
  ASSERT_EQ(small->warnings().size(), 1u);
  EXPECT_EQ(small->warnings()[0].rfind("alignment 8 is below 32", 0), 0u);
}

TEST(GgufMalformed, AcceptsVersion2) {
  RawFile f = base();
  f.version = 2;
  EXPECT_EQ(File::parse(f.build(), "v2.gguf")->version(), 2u);
}

// Every prefix of a valid file is rejected cleanly, up to the end of the last payload; from
// there on (only the last tensor's padding missing) llama.cpp's loader accepts it, and so do we.
TEST(GgufMalformed, EveryTruncationRejected) {
  RawFile f = base();
  RawKv arr{"test.strs", 9, {}};
  arr.payload.u32(8).u64(3).str("one").str("").str("three");
  f.kvs.push_back(arr);
  auto bytes = f.build();
  const size_t end_of_data = f.data_offset + 32 + 32;  // 'b' (32 bytes) at data offset 32
  ASSERT_LE(end_of_data, bytes.size());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    std::string e = parse_error(cut);
    if (n < end_of_data) {
      EXPECT_EQ(e.rfind("bad.gguf: at byte ", 0), 0u) << "prefix " << n << ": " << e;
    } else {
      EXPECT_EQ(e, "accepted") << "prefix " << n;
    }
  }
}

}  // namespace
}  // namespace boltrt::gguf
