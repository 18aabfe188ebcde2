// dsv4_indexer_topk (see dsv4-indexer.h): tokens split over the pool's
// threads; a token's queries are widened to f64 once, and four keys are scored
// together per head (four independent f64 dot chains over i, each in order,
// sharing each query load), their head terms folded in head order. Every score
// therefore follows the _ref twin's arithmetic exactly, and the selection is
// the same heap select, so the picks equal the twin's bit for bit.
#include <vector>

#include "dsv4-indexer.h"

namespace kvt {
namespace {

struct TokenScratch {
  std::vector<double> qd;   // [H][D] the token's queries in f64
  std::vector<float> s;     // [n] scores
  std::vector<int32_t> ids; // [n] heap select
};

void select_token(int32_t* sel, const float* q, const float* w, const float* keys, const int32_t* n, int t, int H, int D, int k,
                  double scale, TokenScratch& sc) {
  int32_t* out = sel + (size_t)t * k;
  const int nt = n[t];
  if (nt <= k) {
    for (int j = 0; j < nt; ++j) out[j] = j;
    return;
  }
  sc.qd.resize((size_t)H * D);
  sc.s.resize(nt);
  sc.ids.resize(nt);
  const float* qt = q + (size_t)t * H * D;
  for (size_t i = 0; i < (size_t)H * D; ++i) sc.qd[i] = qt[i];
  const float* wt = w + (size_t)t * H;
  float* s = sc.s.data();
  int j = 0;
  for (; j + 4 <= nt; j += 4) {
    const float* k0 = keys + (size_t)j * D;
    const float *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (int h = 0; h < H; ++h) {
      const double* qh = &sc.qd[(size_t)h * D];
      double d0 = 0, d1 = 0, d2 = 0, d3 = 0;
      for (int i = 0; i < D; ++i) {
        const double qi = qh[i];
        d0 += qi * (double)k0[i];
        d1 += qi * (double)k1[i];
        d2 += qi * (double)k2[i];
        d3 += qi * (double)k3[i];
      }
      const double wh = wt[h];
      if (d0 > 0) a0 += d0 * wh * scale;
      if (d1 > 0) a1 += d1 * wh * scale;
      if (d2 > 0) a2 += d2 * wh * scale;
      if (d3 > 0) a3 += d3 * wh * scale;
    }
    s[j] = (float)a0;
    s[j + 1] = (float)a1;
    s[j + 2] = (float)a2;
    s[j + 3] = (float)a3;
  }
  for (; j < nt; ++j) {
    const float* kj = keys + (size_t)j * D;
    double acc = 0;
    for (int h = 0; h < H; ++h) {
      const double* qh = &sc.qd[(size_t)h * D];
      double dot = 0;
      for (int i = 0; i < D; ++i) dot += qh[i] * (double)kj[i];
      if (dot > 0) acc += dot * (double)wt[h] * scale;
    }
    s[j] = (float)acc;
  }
  dsv4_indexer_select(sc.ids.data(), s, nt, k);
  for (int i = 0; i < k; ++i) out[i] = sc.ids[i];
}

}  // namespace

void dsv4_indexer_topk(int32_t* sel, const float* q, const float* w, const float* keys, const int32_t* n, int T, int H, int D, int k,
                       double scale, ThreadPool& pool) {
  parallel_for_dynamic(pool, (size_t)T, 1, [&](size_t b, size_t e) {
    thread_local TokenScratch scratch;
    for (size_t t = b; t < e; ++t) select_token(sel, q, w, keys, n, (int)t, H, D, k, scale, scratch);
  });
}

}  // namespace kvt
