// Helpers shared by the matmul tests and benchmark: deterministic random weight rows of any
// computable type, built directly from random bytes with sane scale fields.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/ggml_type.h"
#include "quant/unpack.h"

namespace boltrt::test {

inline int64_t matmul_block_elems(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return 1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      return 256;
    default:
      return 32;
  }
}

inline size_t matmul_block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return 4;
    case GgmlType::F16:
    case GgmlType::BF16:
      return 2;
    case GgmlType::Q4_0:
      return 18;
    case GgmlType::Q4_1:
      return 20;
    case GgmlType::Q5_0:
      return 22;
    case GgmlType::Q5_1:
      return 24;
    case GgmlType::Q8_0:
      return 34;
    case GgmlType::Q2_K:
      return 84;
    case GgmlType::Q3_K:
      return 110;
    case GgmlType::Q4_K:
      return 144;
    case GgmlType::Q5_K:
      return 176;
    case GgmlType::Q6_K:
      return 210;
    case GgmlType::IQ4_NL:
      return 18;
    case GgmlType::IQ4_XS:
      return 136;
    case GgmlType::MXFP4:
      return 17;
    default:
      return 0;
  }
}

inline const char* type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return "f32";
    case GgmlType::F16:
      return "f16";
    case GgmlType::BF16:
      return "bf16";
    case GgmlType::Q4_0:
      return "q4_0";
    case GgmlType::Q4_1:
      return "q4_1";
    case GgmlType::Q5_0:
      return "q5_0";
    case GgmlType::Q5_1:
      return "q5_1";
    case GgmlType::Q8_0:
      return "q8_0";
    case GgmlType::Q2_K:
      return "q2_K";
    case GgmlType::Q3_K:
      return "q3_K";
    case GgmlType::Q4_K:
      return "q4_K";
    case GgmlType::Q5_K:
      return "q5_K";
    case GgmlType::Q6_K:
      return "q6_K";
    case GgmlType::IQ4_NL:
      return "iq4_nl";
    case GgmlType::IQ4_XS:
      return "iq4_xs";
    case GgmlType::MXFP4:
      return "mxfp4";
    default:
      return "?";
  }
}

// rows x cols weights of type t: random code bytes, scales random in +-[0.002, 0.02] (fp16),
// mins positive, MXFP4 exponents near 2^-8.
inline std::vector<uint8_t> random_weights(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  using namespace boltrt;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.002f, 0.02f);
  const int64_t nblocks = rows * cols / matmul_block_elems(t);
  const size_t bb = matmul_block_bytes(t);
  std::vector<uint8_t> data(static_cast<size_t>(nblocks) * bb);
  for (auto& byte : data) byte = static_cast<uint8_t>(rng());
  auto scale = [&](bool allow_negative) {
    const float v = mag(rng);
    return fp32_to_fp16(allow_negative && (rng() & 1) ? -v : v);
  };
  auto set16 = [](uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); };
  for (int64_t b = 0; b < nblocks; ++b) {
    uint8_t* p = data.data() + b * bb;
    switch (t) {
      case GgmlType::F32: {
        const float v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case GgmlType::F16:
        set16(p, fp32_to_fp16(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng)));
        break;
      case GgmlType::BF16:
        set16(p, fp32_to_bf16(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng)));
        break;
      case GgmlType::Q4_0:
      case GgmlType::Q5_0:
      case GgmlType::Q8_0:
      case GgmlType::IQ4_NL:
        set16(p, scale(true));
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
        set16(p, scale(false));
        set16(p + 2, scale(true));
        break;
      case GgmlType::MXFP4:
        p[0] = static_cast<uint8_t>(118 + rng() % 8);
        break;
      case GgmlType::Q2_K:
        set16(p + 80, scale(false));
        set16(p + 82, scale(false));
        break;
      case GgmlType::Q3_K:
        set16(p + 108, scale(true));
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        set16(p, scale(false));
        set16(p + 2, scale(false));
        break;
      case GgmlType::Q6_K:
        set16(p + 208, scale(true));
        break;
      case GgmlType::IQ4_XS:
        set16(p, scale(true));
        break;
      default:
        break;
    }
  }
  return data;
}

inline std::vector<float> random_activations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  // A few outliers, as real activations have.
  for (size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;
  return x;
}

}  // namespace boltrt::test
