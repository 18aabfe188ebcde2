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

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

// Work item: up to kRows consecutive query rows of one segment × the heads of
// one kv group (P = rows·group (row, head) pairs). Keys go in tiles of one
// page (64): a tile's K (then V) is widened to f32 once into an L1-sized
// buffer and used by all P pairs before the next tile, so the inner loops
// read L1, not L2.
//   pass 1  tile by tile: s[p][j] = (q_p · k_j in lane16 order) · scale
//   pass 2  per pair: max, e = exp(s − max), Σe in lane16 order
//   pass 3  tile by tile: o[p] += e[p][j] · v_j (sequential j across tiles)
//   out = o · (1/Σe)
// The operations per (row, head) are exactly those of attention_ref.
constexpr int kRows = 4;
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

// s[0..n) = (q · k_t) · scale for the rows k_t of kt [n][D].
template <int CH>
static void qk_scores(float* s, const float* q, const float* kt, int D, int n, float scale) {
  const int chunks = CH ? CH : (D + 15) / 16;
  V16 qv[CH ? CH : kMaxChunks];
  for (int c = 0; c < chunks; ++c) qv[c] = CH ? load(q + c * 16) : load_n(q + c * 16, D - c * 16);
  int j0 = 0;
#if KVT_V16_AVX512
  if constexpr (CH > 0) {
    // 16 keys at a time: the 16 lane16 reductions done as one transposing
    // tree — the very same additions as reduce_sum, 3 ops per key instead of 8.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512 vscale = _mm512_set1_ps(scale);
    for (; j0 + 16 <= n; j0 += 16) {
      __m512 a[16];
      for (int t = 0; t < 16; ++t) {
        const float* kr = kt + (size_t)(j0 + t) * D;
        V16 acc = zero();
        for (int c = 0; c < CH; ++c) acc = fma(qv[c], load(kr + c * 16), acc);
        a[t] = acc.v;
      }
      __m512 t8[8], u4[4];
      for (int t = 0; t < 8; ++t)  // lanes i + (i+8): keys 2t, 2t+1
        t8[t] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * t], a[2 * t + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(a[2 * t], a[2 * t + 1], _MM_SHUFFLE(3, 2, 3, 2)));
      for (int u = 0; u < 4; ++u)  // i + (i+4): quarter q = key 4u+q
        u4[u] = _mm512_add_ps(_mm512_shuffle_f32x4(t8[2 * u], t8[2 * u + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(t8[2 * u], t8[2 * u + 1], _MM_SHUFFLE(3, 1, 3, 1)));
      __m512 v0 = _mm512_add_ps(_mm512_shuffle_ps(u4[0], u4[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_ps(u4[0], u4[1], _MM_SHUFFLE(3, 2, 3, 2)));
      __m512 v1 = _mm512_add_ps(_mm512_shuffle_ps(u4[2], u4[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_ps(u4[2], u4[3], _MM_SHUFFLE(3, 2, 3, 2)));
      __m512 d = _mm512_add_ps(_mm512_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
      // element 4q+r holds key 4r+q
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

// s[0..n) := exp(s − max); returns 1/Σ.
static float softmax_scores(float* s, int n) {
  float m = s[0];
  for (int j = 1; j < n; ++j) m = s[j] > m ? s[j] : m;
  V16 vm = set1(m);
  V16 sum = zero();
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    V16 e = exp16(sub(load(s + j), vm));
    store(s + j, e);
    sum = add(sum, e);
  }
  if (j < n) {
    float tmp[16];
    store(tmp, exp16(sub(load_n(s + j, n - j), vm)));
    for (int t = n - j; t < 16; ++t) tmp[t] = 0.0f;
    V16 e = load(tmp);
    store_n(s + j, e, n - j);
    sum = add(sum, e);
  }
  return 1.0f / reduce_sum(sum);
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
  const size_t s_stride = (size_t)n_max + 16;
  thread_local std::vector<float> scores, acc, tile, inv;
  if (inv.size() < (size_t)P) inv.resize((size_t)P);
  if (scores.size() < (size_t)P * s_stride) scores.resize((size_t)P * s_stride);
  if (acc.size() < (size_t)P * D) acc.resize((size_t)P * D);
  if (tile.size() < (size_t)kPageTokens * D) tile.resize((size_t)kPageTokens * D);
  auto row_of = [&](int p) { return (size_t)sg.q_row0 + bl.row0 + p / group; };
  auto head_of = [&](int p) { return g * group + p % group; };
  auto keys_of = [&](int p) { return sg.pos0 + bl.row0 + p / group + 1; };
  for (int t0 = 0; t0 < n_max; t0 += kPageTokens) {
    int tn = n_max - t0 < kPageTokens ? n_max - t0 : kPageTokens;
    widen_tile<KD>(tile.data(), pages, kv, sg.block_table[t0 / kPageTokens], layer, 0, g, tn);
    for (int p = 0; p < P; ++p) {
      int n = keys_of(p) - t0;
      if (n <= 0) continue;
      qk_scores<CH>(scores.data() + p * s_stride + t0, q + row_of(p) * stride + (size_t)head_of(p) * D, tile.data(), D,
                    n < tn ? n : tn, scale);
    }
  }
  for (int p = 0; p < P; ++p) inv[p] = softmax_scores(scores.data() + p * s_stride, keys_of(p));
  std::fill(acc.begin(), acc.begin() + (size_t)P * D, 0.0f);
  for (int t0 = 0; t0 < n_max; t0 += kPageTokens) {
    int tn = n_max - t0 < kPageTokens ? n_max - t0 : kPageTokens;
    widen_tile<KD>(tile.data(), pages, kv, sg.block_table[t0 / kPageTokens], layer, 1, g, tn);
    for (int p = 0; p < P; ++p) {
      int n = keys_of(p) - t0;
      if (n <= 0) continue;
      pv_accumulate<CH>(acc.data() + (size_t)p * D, scores.data() + p * s_stride + t0, tile.data(), D, n < tn ? n : tn);
    }
  }
  for (int p = 0; p < P; ++p) {
    float* o = out + row_of(p) * stride + (size_t)head_of(p) * D;
    V16 vi = set1(inv[p]);
    for (int c = 0; c < D; c += 16) store_n(o + c, mul(load_n(acc.data() + (size_t)p * D + c, D - c), vi), D - c);
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
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].n_q; i += kRows)
      blocks.push_back({s, i, segs[s].n_q - i < kRows ? segs[s].n_q - i : kRows});
  ItemFn fn = kv.dtype == F32 ? pick_item_fn<F32>(kv.head_dim) : pick_item_fn<F16>(kv.head_dim);
  // items in reverse so the long (late-position) rows start first
  const size_t n_items = blocks.size() * kv.kv_heads;
  parallel_for_dynamic(pool, n_items, 1, [&](size_t b, size_t e) {
    for (size_t it = b; it < e; ++it) {
      size_t rit = n_items - 1 - it;
      const AttnItem& bl = blocks[rit / kv.kv_heads];
      fn(out, q, pages, kv, layer, n_heads, scale, segs[bl.seg], bl, (int)(rit % kv.kv_heads));
    }
  });
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
