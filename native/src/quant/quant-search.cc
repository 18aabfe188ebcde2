// Scale searches shared by the k-quant quantizers. Float operations follow
// ggml's reference order exactly (left to right, f32, no fused multiply-add),
// since every intermediate comparison decides which quants are stored.
#include "quant-search.h"

#include <cmath>

#include "quant-common.h"

namespace kvt {
namespace quant {

float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float fnmax = (float)nmax;
  float iscale = (float)-nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = (int8_t)(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * (float)l;
    suml2 += w * (float)l * (float)l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(fnmax + 0.1f * (float)is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * (float)l;
      suml2 += w * (float)l * (float)l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i]))));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = (float)-nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = (int8_t)l;
    const float w = x[i] * x[i];
    sumlx += w * x[i] * (float)l;
    suml2 += w * (float)l * (float)l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * (float)L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * (float)L[i] * (float)L[i];
        const int new_l = imax(-nmax, imin(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (new_l != L[i]) {
          slx += w * x[i] * (float)new_l;
          sl2 += w * (float)new_l * (float)new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = (int8_t)new_l;
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  const float fnmax = (float)nmax;
  float iscale = fnmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = (uint8_t)imax(0, imin(nmax, l));
    float diff = scale * (float)L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * (float)is + fnmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = (uint8_t)l;
      const float w = weights[i];
      sum_l += w * (float)l;
      sum_l2 += w * (float)l * (float)l;
      sum_xl += w * (float)l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * (float)Laux[i] + this_min - x[i];
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

}  // namespace quant
}  // namespace kvt
