// The ggml type table (gguf.md §6): every id of llama.cpp v0.4.0 with its name and block shape.
#include <gtest/gtest.h>

#include "quant/blocks.h"
#include "quant/ggml_type.h"
#include "util/error.h"

namespace boltrt {
namespace {

struct Row {
  uint32_t id;
  const char* name;
  int64_t block;
  size_t bytes;
};

TEST(GgmlTypeTable, MatchesLlamaCpp) {
  const Row rows[] = {
      {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},
      {3, "q4_1", 32, 20},      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},
      {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},      {10, "q2_K", 256, 84},
      {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
      {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66},
      {17, "iq2_xs", 256, 74},  {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
      {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},
      {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},
      {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},
      {29, "iq1_m", 256, 56},   {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},
      {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},    {40, "nvfp4", 64, 36},
      {41, "q1_0", 128, 18},    {42, "q2_0", 64, 18},
  };
  for (const Row& r : rows) {
    const TypeTraits& t = type_traits(r.id);
    EXPECT_TRUE(t.known) << r.id;
    EXPECT_FALSE(t.removed) << r.id;
    EXPECT_EQ(t.name, r.name) << r.id;
    EXPECT_EQ(t.block_size, r.block) << r.id;
    EXPECT_EQ(t.type_size, r.bytes) << r.id;
    EXPECT_EQ(type_from_name(r.name), static_cast<GgmlType>(r.id)) << r.name;
  }
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u}) {
    EXPECT_TRUE(type_traits(id).removed) << id;
    EXPECT_FALSE(type_traits(id).known) << id;
    EXPECT_EQ(type_traits(id).block_size, 0) << id;
  }
  for (uint32_t id : {43u, 100u, 0xFFFFFFFFu}) {
    EXPECT_FALSE(type_traits(id).known) << id;
    EXPECT_FALSE(type_traits(id).removed) << id;
  }
  EXPECT_EQ(kGgmlTypeCount, 43u);
}

TEST(GgmlTypeTable, ComputableTypesHaveBlockStructs) {
  EXPECT_EQ(type_traits(GgmlType::Q4_0).type_size, sizeof(BlockQ4_0));
  EXPECT_EQ(type_traits(GgmlType::Q4_K).type_size, sizeof(BlockQ4_K));
  EXPECT_EQ(type_traits(GgmlType::Q6_K).type_size, sizeof(BlockQ6_K));
  EXPECT_EQ(type_traits(GgmlType::MXFP4).type_size, sizeof(BlockMXFP4));
  EXPECT_EQ(type_traits(GgmlType::IQ4_XS).type_size, sizeof(BlockIQ4_XS));
  int computable = 0;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) computable += type_traits(id).computable;
  EXPECT_EQ(computable, 16);  // F32, F16, BF16, 5 legacy, 5 K-quants, IQ4_NL, IQ4_XS, MXFP4
}

TEST(GgmlTypeTable, NamesParseCaseInsensitively) {
  EXPECT_EQ(type_from_name("Q4_K"), GgmlType::Q4_K);
  EXPECT_EQ(type_from_name("q4_k"), GgmlType::Q4_K);
  EXPECT_EQ(type_from_name("BF16"), GgmlType::BF16);
  EXPECT_EQ(type_from_name("MXFP4"), GgmlType::MXFP4);
  EXPECT_EQ(type_from_name("q4_2"), std::nullopt);    // removed
  EXPECT_EQ(type_from_name("q4_K_M"), std::nullopt);  // a file type, not a tensor type
  EXPECT_EQ(type_from_name(""), std::nullopt);
}

TEST(GgmlTypeTable, RowSize) {
  EXPECT_EQ(row_size(GgmlType::Q4_K, 2560), 10u * 144u);
  EXPECT_EQ(row_size(GgmlType::Q8_0, 32), 34u);
  EXPECT_EQ(row_size(GgmlType::F16, 7), 14u);
  EXPECT_EQ(row_size(GgmlType::MXFP4, 0), 0u);
  EXPECT_THROW(row_size(GgmlType::Q4_K, 704), Error);
  EXPECT_THROW(row_size(static_cast<GgmlType>(4), 32), Error);
  EXPECT_THROW(row_size(static_cast<GgmlType>(77), 32), Error);
}

}  // namespace
}  // namespace boltrt
