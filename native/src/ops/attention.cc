// Causal GQA attention over paged KV, per ISA.
//   q, out : [rows][n_heads][head_dim]   rows = Σ segs[s].n_q, in segment order
//   pages  : KV pool, page[layer][K|V][kv_head][64][head_dim] (f16 or f32)
//   query i of segment s sits at position pos0+i and attends keys [0, pos0+i]
//   kv head of head h = h / (n_heads / kv_heads)
// One (row, head) is computed by one thread start to finish:
//   s_j = (q·k_j in lane16 order) · scale;  e_j = exp(s_j − max);  Σe in lane16;
//   o = Σ_j e_j·v_j (sequential j);  out = o · (1/Σe)
// so a query's result never depends on the other queries in the call.
#include <algorithm>
#include <vector>

#include "../kernels.h"
#include "../simd/v16.h"
#include "softmax-scores.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

// Work item: up to kItemPairs / group consecutive query rows of one segment ×
// the heads of one kv group (P = rows·group (row, head) pairs). Keys go in
// tiles of one page (64): a tile's K (then V) is widened to f32 once into an
// L1-sized buffer and used by all P pairs before the next tile, so the inner
// loops read L1, not L2.
//   pass 1  tile by tile: s[p][j] = (q_p · k_j in lane16 order) · scale
//   pass 2  per pair: max, e = exp(s − max), Σe in lane16 order
//   pass 3  tile by tile: o[p] += e[p][j] · v_j (sequential j across tiles)
//   out = o · (1/Σe)
// The operations per (row, head) are exactly those of attention_ref; what
// the ISA paths change is only which pairs and keys share a load:
//   AVX-512, head_dim 16/32/64: K widened quarter-interleaved (widen_tile_q4)
//     so the first two reduction levels of 4 keys are plain adds;
//   AVX-512, head_dim 128: qk_scores_n, one key load for 2 pairs;
//   AVX-512 pass 3: pv_accumulate_n, one V row for 4 (2) pairs, which also
//     gives enough independent fma chains to hide the fma latency.
// Long rows (prefill deep in a context) amortize the tile widening over
// up to kItemPairs pairs (48: 16 rows of synthetic:small's group of 3 measured
// ~5% faster than 8 rows, scratch ~P·context floats); a decode row is an item
// of its own.
constexpr int kItemPairs = 48;
constexpr int kMaxChunks = 16;  // head_dim <= 256 (checked by the binding)

// Widens rows [0, n) of one page's (layer, kv, head) slice into dst [n][D].
template <int KD>
static void widen_tile(float* dst, const uint8_t* pages, const KvLayout& kv, int page, int layer, int which, int kvh,
                       int n) {
  const size_t base = (size_t)page * kv.page_elems() + kv.offset(layer, which, kvh, 0);
  const size_t cnt = (size_t)n * kv.head_dim;
  if constexpr (KD == F32) {
    std::memcpy(dst, reinterpret_cast<const float*>(pages) + base, cnt * 4);
  } else {
    const uint16_t* src = reinterpret_cast<const uint16_t*>(pages) + base;
    size_t i = 0;
    for (; i + 16 <= cnt; i += 16) store(dst + i, load_f16(src + i));
    for (; i < cnt; ++i) dst[i] = f16_to_f32(src[i]);
  }
}

#if KVT_V16_AVX512
// The last two levels (i+2, i+1) of tree16, from u4[u] whose quarter q
// holds lanes 0..3 of key 4u+q after the first two.
static inline __m512 tree16_tail(const __m512* u4) {
  __m512 v0 = _mm512_add_ps(_mm512_shuffle_ps(u4[0], u4[1], _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_ps(u4[0], u4[1], _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 v1 = _mm512_add_ps(_mm512_shuffle_ps(u4[2], u4[3], _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_ps(u4[2], u4[3], _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 d = _mm512_add_ps(_mm512_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
  return d;
}

// reduce_sum of 16 accumulators a[0..16) at once, as one transposing tree: the
// very same additions as reduce_sum (i+8, i+4, i+2, i+1), 3 ops per key
// instead of 8. Element 4q+r of the result holds key 4r+q (tree16_order()
// puts key t in element t).
static inline __m512 tree16(const __m512* a) {
  __m512 t8[8], u4[4];
  for (int t = 0; t < 8; ++t)  // lanes i + (i+8): keys 2t, 2t+1
    t8[t] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * t], a[2 * t + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_f32x4(a[2 * t], a[2 * t + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int u = 0; u < 4; ++u)  // i + (i+4): quarter q = key 4u+q
    u4[u] = _mm512_add_ps(_mm512_shuffle_f32x4(t8[2 * u], t8[2 * u + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(t8[2 * u], t8[2 * u + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return tree16_tail(u4);
}

static inline __m512i tree16_order() { return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15); }

// qk_scores for NP pairs over the same keys [0, n), n a multiple of 16: each
// key chunk is loaded once for all NP pairs. Per (pair, key) the same fma
// chain and tree as qk_scores.
template <int CH, int NP>
static void qk_scores_n(float* const* s, const float* const* q, const float* kt, int n, float scale) {
  constexpr int D = CH * 16;
  V16 qv[NP][CH];
  for (int p = 0; p < NP; ++p)
    for (int c = 0; c < CH; ++c) qv[p][c] = load(q[p] + c * 16);
  const __m512i order = tree16_order();
  const __m512 vscale = _mm512_set1_ps(scale);
  alignas(64) __m512 a[NP][16];
  for (int j0 = 0; j0 < n; j0 += 16) {
    for (int t = 0; t < 16; ++t) {
      const float* kr = kt + (size_t)(j0 + t) * D;
      V16 k[CH];
      for (int c = 0; c < CH; ++c) k[c] = load(kr + c * 16);
      for (int p = 0; p < NP; ++p) {
        V16 acc = zero();
        for (int c = 0; c < CH; ++c) acc = fma(qv[p][c], k[c], acc);
        a[p][t] = acc.v;
      }
    }
    for (int p = 0; p < NP; ++p)
      _mm512_storeu_ps(s[p] + j0, _mm512_mul_ps(_mm512_permutexvar_ps(order, tree16(a[p])), vscale));
  }
}

// K tile in the quarter-interleaved layout of qk_scores_q4: keys in groups of
// four, and within a group, chunk c (dims 16c..16c+15), quarter x (4 dims):
//   dst[(t/4)·4D + 64c + 16x + 4(t%4) + i] = k_t[16c + 4x + i]
// so one 16-lane load holds quarter x of chunk c for four keys.
template <int KD>
static void widen_tile_q4(float* dst, const uint8_t* pages, const KvLayout& kv, int page, int layer, int kvh, int n) {
  const int D = kv.head_dim;
  const size_t base = (size_t)page * kv.page_elems() + kv.offset(layer, 0, kvh, 0);
  auto row = [&](int t, int c) -> __m512 {
    if (t >= n) return _mm512_setzero_ps();
    if constexpr (KD == F32) return _mm512_loadu_ps(reinterpret_cast<const float*>(pages) + base + (size_t)t * D + c);
    else return load_f16(reinterpret_cast<const uint16_t*>(pages) + base + (size_t)t * D + c).v;
  };
  for (int t = 0; t < n; t += 4) {
    float* g = dst + (size_t)t * D;
    for (int c = 0; c < D; c += 16) {
      // 4×4 transpose of 128-bit quarters: [A_x B_x C_x D_x] for x = 0..3
      __m512 a = row(t, c), b = row(t + 1, c), cc = row(t + 2, c), d = row(t + 3, c);
      __m512 t0 = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0));  // A0 A1 B0 B1
      __m512 t1 = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2));  // A2 A3 B2 B3
      __m512 t2 = _mm512_shuffle_f32x4(cc, d, _MM_SHUFFLE(1, 0, 1, 0));
      __m512 t3 = _mm512_shuffle_f32x4(cc, d, _MM_SHUFFLE(3, 2, 3, 2));
      float* o = g + c * 4;
      _mm512_store_ps(o, _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_store_ps(o + 16, _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(3, 1, 3, 1)));
      _mm512_store_ps(o + 32, _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_store_ps(o + 48, _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(3, 1, 3, 1)));
    }
  }
}

// qk_scores over a quarter-interleaved tile (widen_tile_q4), 16 keys at a
// time. Accumulator x of a 4-key group holds, for each of its keys, lanes
// 4x..4x+3 of qk_scores' accumulator with the same fma chain (c ascending);
// the first two tree levels are then plain adds, (x0 + x2) + (x1 + x3), in
// tree16's operand order, and tree16_tail does the rest. Keys past n in the
// last group of 16 are computed from stale tile rows and never stored.
template <int CH>
static void qk_scores_q4(float* s, const float* q, const float* kt4, int n, float scale) {
  constexpr int D = CH * 16;
  __m512 qb[CH][4];
  for (int c = 0; c < CH; ++c)
    for (int x = 0; x < 4; ++x) qb[c][x] = _mm512_broadcast_f32x4(_mm_loadu_ps(q + c * 16 + x * 4));
  const __m512i order = tree16_order();
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int j0 = 0; j0 < n; j0 += 16) {
    __m512 u4[4];
    for (int u = 0; u < 4; ++u) {
      const float* g = kt4 + (size_t)((j0 >> 2) + u) * 4 * D;
      __m512 a[4];
      for (int x = 0; x < 4; ++x) a[x] = _mm512_setzero_ps();
      for (int c = 0; c < CH; ++c)
        for (int x = 0; x < 4; ++x) a[x] = _mm512_fmadd_ps(qb[c][x], _mm512_load_ps(g + c * 64 + x * 16), a[x]);
      u4[u] = _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
    }
    __m512 r = _mm512_mul_ps(_mm512_permutexvar_ps(order, tree16_tail(u4)), vscale);
    _mm512_mask_storeu_ps(s + j0, mask16(n - j0), r);
  }
}
#endif

// s[0..n) = (q · k_t) · scale for the rows k_t of kt [n][D].
template <int CH>
static void qk_scores(float* s, const float* q, const float* kt, int D, int n, float scale) {
  const int chunks = CH ? CH : (D + 15) / 16;
  V16 qv[CH ? CH : kMaxChunks];
  for (int c = 0; c < chunks; ++c) qv[c] = CH ? load(q + c * 16) : load_n(q + c * 16, D - c * 16);
  int j0 = 0;
#if KVT_V16_AVX512
  if constexpr (CH > 0) {
    // 16 keys at a time, reduced by tree16
    const __m512i order = tree16_order();
    const __m512 vscale = _mm512_set1_ps(scale);
    for (; j0 + 16 <= n; j0 += 16) {
      __m512 a[16];
      for (int t = 0; t < 16; ++t) {
        const float* kr = kt + (size_t)(j0 + t) * D;
        V16 acc = zero();
        for (int c = 0; c < CH; ++c) acc = fma(qv[c], load(kr + c * 16), acc);
        a[t] = acc.v;
      }
      __m512 d = tree16(a);
      _mm512_storeu_ps(s + j0, _mm512_mul_ps(_mm512_permutexvar_ps(order, d), vscale));
    }
  }
#endif
  for (int j = j0; j < n; ++j) {
    const float* kr = kt + (size_t)j * D;
    V16 acc = zero();
    for (int c = 0; c < chunks; ++c) acc = fma(qv[c], CH ? load(kr + c * 16) : load_n(kr + c * 16, D - c * 16), acc);
    s[j] = reduce_sum(acc) * scale;
  }
}

// o [D] += Σ_t e[t] · vt[t] for t in [0, n), sequential t.
template <int CH>
static void pv_accumulate(float* o, const float* e, const float* vt, int D, int n) {
  const int chunks = CH ? CH : (D + 15) / 16;
  V16 acc[CH ? CH : kMaxChunks];
  for (int c = 0; c < chunks; ++c) acc[c] = CH ? load(o + c * 16) : load_n(o + c * 16, D - c * 16);
  for (int t = 0; t < n; ++t) {
    const float* vr = vt + (size_t)t * D;
    V16 et = set1(e[t]);
    for (int c = 0; c < chunks; ++c) acc[c] = fma(et, CH ? load(vr + c * 16) : load_n(vr + c * 16, D - c * 16), acc[c]);
  }
  for (int c = 0; c < chunks; ++c) store_n(o + c * 16, acc[c], D - c * 16);
}

// pv_accumulate for NP pairs at once over the same V rows: each V row is
// loaded once for all NP pairs, and NP·CH independent fma chains hide the
// fma latency that CH chains alone cannot. Per pair the chain is the same
// sequential-t fma chain as pv_accumulate's.
template <int CH, int NP>
static void pv_accumulate_n(float* const* o, const float* const* e, const float* vt, int n) {
  constexpr int D = CH * 16;
  V16 acc[NP][CH];
  for (int p = 0; p < NP; ++p)
    for (int c = 0; c < CH; ++c) acc[p][c] = load(o[p] + c * 16);
  for (int t = 0; t < n; ++t) {
    const float* vr = vt + (size_t)t * D;
    V16 v[CH];
    for (int c = 0; c < CH; ++c) v[c] = load(vr + c * 16);
    for (int p = 0; p < NP; ++p) {
      V16 et = set1(e[p][t]);
      for (int c = 0; c < CH; ++c) acc[p][c] = fma(et, v[c], acc[p][c]);
    }
  }
  for (int p = 0; p < NP; ++p)
    for (int c = 0; c < CH; ++c) store(o[p] + c * 16, acc[p][c]);
}

// Pairs per qk_scores_n (AVX-512, used for head_dim 128: CH = 8): NP·CH q
// registers plus CH key registers of 32.
template <int CH>
constexpr int qk_pairs() {
  return CH <= 4 ? 4 : 2;
}

// Pairs per pv_accumulate_n: 32 zmm registers hold NP·CH accumulators plus a
// V row; AVX2's V16 already gives 2·CH chains in 16 ymm registers.
template <int CH>
constexpr int pv_pairs() {
#if KVT_V16_AVX512
  return CH == 0 ? 1 : CH <= 4 ? 4 : 2;
#else
  return 1;
#endif
}

// n floats of v from a 64-byte boundary (v grows, never shrinks).
static float* aligned_scratch(std::vector<float>& v, size_t n) {
  if (v.size() < n + 16) v.resize(n + 16);
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~(uintptr_t)63);
}

struct AttnItem {
  int seg, row0, rows;
};

template <int CH, int KD>
static void attend_item(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
                        float scale, const AttnSegment& sg, const AttnItem& bl, int g) {
  const int D = kv.head_dim;
  const int group = n_heads / kv.kv_heads;
  const int P = bl.rows * group;
  const size_t stride = (size_t)n_heads * D;
  const int n_max = sg.pos0 + bl.row0 + bl.rows;
  // 64-byte aligned rows: a 16-lane load that straddles two cache lines costs
  // two, and these buffers are read once per fma
  const size_t s_stride = ((size_t)n_max + 16 + 15) & ~(size_t)15;
  thread_local std::vector<float> scores_buf, acc_buf, tile_buf, inv;
  if (inv.size() < (size_t)P) inv.resize((size_t)P);
  float* sc = aligned_scratch(scores_buf, (size_t)P * s_stride);
  float* ac = aligned_scratch(acc_buf, (size_t)P * D);
  float* tl = aligned_scratch(tile_buf, (size_t)kPageTokens * D);
  auto row_of = [&](int p) { return (size_t)sg.q_row0 + bl.row0 + p / group; };
  auto head_of = [&](int p) { return g * group + p % group; };
  auto keys_of = [&](int p) { return sg.pos0 + bl.row0 + p / group + 1; };
  auto q_of = [&](int p) { return q + row_of(p) * stride + (size_t)head_of(p) * D; };
  for (int t0 = 0; t0 < n_max; t0 += kPageTokens) {
    const int tn = std::min(n_max - t0, kPageTokens);
    const int page = sg.block_table[t0 / kPageTokens];
    auto n_of = [&](int p) { return std::min(keys_of(p) - t0, tn); };  // pair p's keys in this tile (<= 0: none)
    int p = 0;
#if KVT_V16_AVX512
    if constexpr (CH > 0 && CH <= 4) {
      widen_tile_q4<KD>(tl, pages, kv, page, layer, g, tn);
      for (; p < P; ++p)
        if (n_of(p) > 0) qk_scores_q4<CH>(sc + p * s_stride + t0, q_of(p), tl, n_of(p), scale);
    } else if constexpr (CH > 0) {
      widen_tile<KD>(tl, pages, kv, page, layer, 0, g, tn);
      // blocks of NP pairs over the 16-key groups they all attend, then each
      // pair's rest (every score is computed on its own, so any split is exact)
      constexpr int NP = qk_pairs<CH>();
      for (; p + NP <= P; p += NP) {
        float* sb[NP];
        const float* qb[NP];
        int nc = tn;
        for (int i = 0; i < NP; ++i) {
          nc = std::min(nc, n_of(p + i));
          sb[i] = sc + (p + i) * s_stride + t0;
          qb[i] = q_of(p + i);
        }
        nc = nc > 0 ? nc & ~15 : 0;
        if (nc > 0) qk_scores_n<CH, NP>(sb, qb, tl, nc, scale);
        for (int i = 0; i < NP; ++i)
          if (n_of(p + i) > nc) qk_scores<CH>(sb[i] + nc, qb[i], tl + (size_t)nc * D, D, n_of(p + i) - nc, scale);
      }
    } else
#endif
    {
      widen_tile<KD>(tl, pages, kv, page, layer, 0, g, tn);
      for (; p < P; ++p)
        if (n_of(p) > 0) qk_scores<CH>(sc + p * s_stride + t0, q_of(p), tl, D, n_of(p), scale);
    }
  }
  for (int p = 0; p < P; ++p) inv[p] = softmax_scores(sc + p * s_stride, keys_of(p));
  std::fill(ac, ac + (size_t)P * D, 0.0f);
  for (int t0 = 0; t0 < n_max; t0 += kPageTokens) {
    const int tn = std::min(n_max - t0, kPageTokens);
    auto n_of = [&](int p) { return std::min(keys_of(p) - t0, tn); };
    widen_tile<KD>(tl, pages, kv, sg.block_table[t0 / kPageTokens], layer, 1, g, tn);
    constexpr int NP = pv_pairs<CH>();
    int p = 0;
    if constexpr (NP > 1) {
      // blocks of NP pairs over the keys they all attend, then each pair's rest
      // (the same sequential-t chain per pair, through ac between the calls)
      for (; p + NP <= P; p += NP) {
        float* ob[NP];
        const float* eb[NP];
        int nc = tn;
        for (int i = 0; i < NP; ++i) {
          nc = std::min(nc, n_of(p + i));
          ob[i] = ac + (size_t)(p + i) * D;
          eb[i] = sc + (p + i) * s_stride + t0;
        }
        nc = std::max(nc, 0);
        if (nc > 0) pv_accumulate_n<CH, NP>(ob, eb, tl, nc);
        for (int i = 0; i < NP; ++i)
          if (n_of(p + i) > nc) pv_accumulate<CH>(ob[i], eb[i] + nc, tl + (size_t)nc * D, D, n_of(p + i) - nc);
      }
    }
    for (; p < P; ++p)
      if (n_of(p) > 0) pv_accumulate<CH>(ac + (size_t)p * D, sc + p * s_stride + t0, tl, D, n_of(p));
  }
  for (int p = 0; p < P; ++p) {
    float* o = out + row_of(p) * stride + (size_t)head_of(p) * D;
    V16 vi = set1(inv[p]);
    for (int c = 0; c < D; c += 16) store_n(o + c, mul(load_n(ac + (size_t)p * D + c, D - c), vi), D - c);
  }
}

using ItemFn = void (*)(float*, const float*, const uint8_t*, const KvLayout&, int, int, float, const AttnSegment&,
                        const AttnItem&, int);

template <int KD>
static ItemFn pick_item_fn(int D) {
  if (D % 16 == 0) {
    switch (D / 16) {
      case 1: return attend_item<1, KD>;
      case 2: return attend_item<2, KD>;
      case 4: return attend_item<4, KD>;
      case 8: return attend_item<8, KD>;
    }
  }
  return attend_item<0, KD>;
}

void attention(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
               float scale, const AttnSegment* segs, int n_segs, ThreadPool& pool) {
  std::vector<AttnItem> blocks;
  const int rows = std::max(1, kItemPairs / (n_heads / kv.kv_heads));
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].n_q; i += rows)
      blocks.push_back({s, i, std::min(segs[s].n_q - i, rows)});
  ItemFn fn = kv.dtype == F32 ? pick_item_fn<F32>(kv.head_dim) : pick_item_fn<F16>(kv.head_dim);
  // Items kv group by kv group, so the items a thread runs in a row read the
  // same K/V pages (one group's pages stay in its L2); within a group the
  // blocks in reverse, so the long (late-position) rows start first.
  const size_t n_blocks = blocks.size();
  const size_t n_items = n_blocks * kv.kv_heads;
  parallel_for_dynamic(pool, n_items, 1, [&](size_t b, size_t e) {
    for (size_t it = b; it < e; ++it) {
      const AttnItem& bl = blocks[n_blocks - 1 - it % n_blocks];
      fn(out, q, pages, kv, layer, n_heads, scale, segs[bl.seg], bl, (int)(it / n_blocks));
    }
  });
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
