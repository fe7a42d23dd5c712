// Scale searches of ggml's reference quantizers, reimplemented from quant-formats.md §4.
// Sums are accumulated in index order in fp32 with the same association as the reference.
#include "quant/quant_search.h"

#include <algorithm>
#include <cmath>

#include "quant/unpack.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace boltrt::quant_detail {
namespace {

inline int clamp_int(int v, int lo, int hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* weights) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = -fnmax / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = weights ? weights[i] : x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(fnmax + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = weights ? weights[i] : x[i] * x[i];
      const float fl = static_cast<float>(l);
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float old_l = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * old_l;
      if (slx > 0.0f) {
        float sl2 = suml2 - w * old_l * old_l;
        const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = fnmax / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + fnmax) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

void make_qkx2_quants_x8(int nmax, const float* x, const float* weights, uint8_t* L, float* scales,
                         float* the_mins, float rmin, float rdelta, int nstep) {
  constexpr int kLanes = 8, kN = 32;
  // Transposed copies: [element][sub-block].
  float xt[kN][kLanes], wt[kN][kLanes];
  for (int j = 0; j < kLanes; ++j) {
    for (int i = 0; i < kN; ++i) {
      xt[i][j] = x[kN * j + i];
      wt[i][j] = weights[kN * j + i];
    }
  }
  float min[kLanes], max[kLanes], sum_w[kLanes], sum_x[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    min[j] = max[j] = xt[0][j];
    sum_w[j] = wt[0][j];
    sum_x[j] = sum_w[j] * xt[0][j];
  }
  for (int i = 1; i < kN; ++i) {
    for (int j = 0; j < kLanes; ++j) {
      min[j] = xt[i][j] < min[j] ? xt[i][j] : min[j];
      max[j] = xt[i][j] > max[j] ? xt[i][j] : max[j];
      sum_w[j] += wt[i][j];
      sum_x[j] += wt[i][j] * xt[i][j];
    }
  }
  const float fnmax = static_cast<float>(nmax);
  float scale[kLanes], best_error[kLanes], range[kLanes];
  bool flat[kLanes];
  int32_t Lt[kN][kLanes], Laux[kN][kLanes];  // 32-bit lanes vectorize
  for (int j = 0; j < kLanes; ++j) {
    if (min[j] > 0.0f) min[j] = 0.0f;
    flat[j] = max[j] == min[j];
    range[j] = max[j] - min[j];
  }
  float iscale[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    iscale[j] = fnmax / range[j];  // inf for flat lanes, whose results are discarded
    scale[j] = 1.0f / iscale[j];
    best_error[j] = 0.0f;
  }
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kLanes; ++j) {
      const int l = std::min(nmax, std::max(0, nearest_int(iscale[j] * (xt[i][j] - min[j]))));
      Lt[i][j] = l;
      float diff = scale[j] * static_cast<float>(l) + min[j] - xt[i][j];
      diff = diff * diff;
      best_error[j] += wt[i][j] * diff;
    }
  }
  for (int step = 0; step <= nstep; ++step) {
    const float numerator = rmin + rdelta * static_cast<float>(step) + fnmax;
    float sum_l[kLanes] = {}, sum_l2[kLanes] = {}, sum_xl[kLanes] = {};
    // min changes when a step improves, and later steps use the new one (as the reference).
    for (int j = 0; j < kLanes; ++j) iscale[j] = numerator / (max[j] - min[j]);
    for (int i = 0; i < kN; ++i) {
      for (int j = 0; j < kLanes; ++j) {
        const int l = std::min(nmax, std::max(0, nearest_int(iscale[j] * (xt[i][j] - min[j]))));
        Laux[i][j] = l;
        const float w = wt[i][j];
        const float fl = static_cast<float>(l);
        sum_l[j] += w * fl;
        sum_l2[j] += w * fl * fl;
        sum_xl[j] += w * fl * xt[i][j];
      }
    }
    float this_scale[kLanes], this_min[kLanes], D[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      D[j] = sum_w[j] * sum_l2[j] - sum_l[j] * sum_l[j];
      this_scale[j] = (sum_w[j] * sum_xl[j] - sum_x[j] * sum_l[j]) / D[j];
      this_min[j] = (sum_l2[j] * sum_x[j] - sum_l[j] * sum_xl[j]) / D[j];
      if (this_min[j] > 0.0f) {
        this_min[j] = 0.0f;
        this_scale[j] = sum_xl[j] / sum_l2[j];
      }
    }
    float cur_error[kLanes] = {};
    for (int i = 0; i < kN; ++i) {
      for (int j = 0; j < kLanes; ++j) {
        float diff = this_scale[j] * static_cast<float>(Laux[i][j]) + this_min[j] - xt[i][j];
        diff = diff * diff;
        cur_error[j] += wt[i][j] * diff;
      }
    }
    for (int j = 0; j < kLanes; ++j) {
      if (!flat[j] && D[j] > 0.0f && cur_error[j] < best_error[j]) {
        for (int i = 0; i < kN; ++i) Lt[i][j] = Laux[i][j];
        best_error[j] = cur_error[j];
        scale[j] = this_scale[j];
        min[j] = this_min[j];
      }
    }
  }
  for (int j = 0; j < kLanes; ++j) {
    if (flat[j]) {
      for (int i = 0; i < kN; ++i) L[kN * j + i] = 0;
      the_mins[j] = -min[j];
      scales[j] = 0.0f;
      continue;
    }
    for (int i = 0; i < kN; ++i) L[kN * j + i] = static_cast<uint8_t>(Lt[i][j]);
    the_mins[j] = -min[j];
    scales[j] = scale[j];
  }
}

float make_qkx3_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  auto weight = [&](int i) { return weights ? weights[i] : x[i] * x[i]; };
  float min = x[0], max = x[0];
  float sum_w = weight(0);
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weight(i);
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max <= min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = fnmax / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weight(i) * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + fnmax) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weight(i);
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weight(i) * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* weights) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
  if (max < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = fnmax / max;
  // L is a byte array in the reference: codes are stored (and compared) modulo 256.
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1.0f / iscale;
  float best_mse = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(L[i]);
    best_mse += weights[i] * diff * diff;
  }
  for (int step = -4; step <= 4; ++step) {
    if (step == 0) continue;
    const float iscale_step = (0.1f * static_cast<float>(step) + fnmax) / max;
    const float scale_step = 1.0f / iscale_step;
    float mse = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(iscale_step * x[i]));
      const float diff = x[i] - scale_step * static_cast<float>(l);
      mse += weights[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_step;
    }
  }
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    const float fl = static_cast<float>(l);  // the sums use the int, not the stored byte
    sumlx += weights[i] * x[i] * fl;
    suml2 += weights[i] * fl * fl;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      const float old_l = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * old_l;
      float sl2 = suml2 - w * old_l * old_l;
      if (slx > 0.0f && sl2 > 0.0f) {
        const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

int best_index_iq4nl(float v) {
  if (v <= static_cast<float>(kIQ4NLValues[0])) return 0;
  if (v >= static_cast<float>(kIQ4NLValues[15])) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < static_cast<float>(kIQ4NLValues[mid])) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - static_cast<float>(kIQ4NLValues[hi - 1]) < static_cast<float>(kIQ4NLValues[hi]) - v
             ? hi - 1
             : hi;
}

}  // namespace boltrt::quant_detail
