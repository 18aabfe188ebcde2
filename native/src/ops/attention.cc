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
// one kv group. K and V of that kv head for every key the item needs are
// widened once into f32 scratch [key][head_dim] (contiguous, no page math in
// the inner loops) and shared by its rows × group heads. The math per
// (row, head) is exactly that of attention_ref.
constexpr int kRows = 4;

template <int KD>
static void gather_kv(float* kf, float* vf, const uint8_t* pages, const KvLayout& kv, int layer, int kvh,
                      const int32_t* table, int n_keys) {
  const int D = kv.head_dim;
  const size_t page_elems = kv.page_elems();
  for (int j0 = 0; j0 < n_keys; j0 += kPageTokens) {
    int n = n_keys - j0 < kPageTokens ? n_keys - j0 : kPageTokens;
    size_t kb = (size_t)table[j0 / kPageTokens] * page_elems + kv.offset(layer, 0, kvh, 0);
    size_t vb = (size_t)table[j0 / kPageTokens] * page_elems + kv.offset(layer, 1, kvh, 0);
    size_t cnt = (size_t)n * D;
    if constexpr (KD == F32) {
      std::memcpy(kf + (size_t)j0 * D, reinterpret_cast<const float*>(pages) + kb, cnt * 4);
      std::memcpy(vf + (size_t)j0 * D, reinterpret_cast<const float*>(pages) + vb, cnt * 4);
    } else {
      const uint16_t* k16 = reinterpret_cast<const uint16_t*>(pages) + kb;
      const uint16_t* v16 = reinterpret_cast<const uint16_t*>(pages) + vb;
      float* ko = kf + (size_t)j0 * D;
      float* vo = vf + (size_t)j0 * D;
      size_t i = 0;
      for (; i + 16 <= cnt; i += 16) {
        store(ko + i, load_f16(k16 + i));
        store(vo + i, load_f16(v16 + i));
      }
      for (; i < cnt; ++i) {
        ko[i] = f16_to_f32(k16[i]);
        vo[i] = f16_to_f32(v16[i]);
      }
    }
  }
}

// CH = head_dim / 16 when head_dim % 16 == 0 and CH <= 8 (registers), else 0 (generic).
template <int CH>
static void attend_row(float* out, const float* q, const float* kf, const float* vf, int D, int n_keys, float scale,
                       float* s) {
  constexpr int kMaxChunks = 16;  // head_dim <= 256 (checked by the binding)
  const int chunks = CH ? CH : (D + 15) / 16;
  V16 qv[CH ? CH : kMaxChunks];
  for (int c = 0; c < chunks; ++c) qv[c] = CH ? load(q + c * 16) : load_n(q + c * 16, D - c * 16);
  for (int j = 0; j < n_keys; ++j) {
    const float* kr = kf + (size_t)j * D;
    V16 acc = zero();
    for (int c = 0; c < chunks; ++c) acc = fma(qv[c], CH ? load(kr + c * 16) : load_n(kr + c * 16, D - c * 16), acc);
    s[j] = reduce_sum(acc) * scale;
  }
  float m = s[0];
  for (int j = 1; j < n_keys; ++j) m = s[j] > m ? s[j] : m;
  V16 vm = set1(m);
  V16 sum = zero();
  int j = 0;
  for (; j + 16 <= n_keys; j += 16) {
    V16 e = exp16(sub(load(s + j), vm));
    store(s + j, e);
    sum = add(sum, e);
  }
  if (j < n_keys) {
    float tmp[16];
    store(tmp, exp16(sub(load_n(s + j, n_keys - j), vm)));
    for (int t = n_keys - j; t < 16; ++t) tmp[t] = 0.0f;
    V16 e = load(tmp);
    store_n(s + j, e, n_keys - j);
    sum = add(sum, e);
  }
  float inv = 1.0f / reduce_sum(sum);
  V16 o[CH ? CH : kMaxChunks];
  for (int c = 0; c < chunks; ++c) o[c] = zero();
  for (j = 0; j < n_keys; ++j) {
    const float* vr = vf + (size_t)j * D;
    V16 e = set1(s[j]);
    for (int c = 0; c < chunks; ++c) o[c] = fma(e, CH ? load(vr + c * 16) : load_n(vr + c * 16, D - c * 16), o[c]);
  }
  V16 vi = set1(inv);
  for (int c = 0; c < chunks; ++c) store_n(out + c * 16, mul(o[c], vi), D - c * 16);
}

using RowFn = void (*)(float*, const float*, const float*, const float*, int, int, float, float*);

void attention(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
               float scale, const AttnSegment* segs, int n_segs, ThreadPool& pool) {
  struct Item {
    int seg, row0, rows;
  };
  std::vector<Item> blocks;
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].n_q; i += kRows)
      blocks.push_back({s, i, segs[s].n_q - i < kRows ? segs[s].n_q - i : kRows});
  const int D = kv.head_dim;
  const int group = n_heads / kv.kv_heads;
  const size_t stride = (size_t)n_heads * D;
  RowFn row_fn = attend_row<0>;
  if (D % 16 == 0) {
    switch (D / 16) {
      case 1: row_fn = attend_row<1>; break;
      case 2: row_fn = attend_row<2>; break;
      case 4: row_fn = attend_row<4>; break;
      case 8: row_fn = attend_row<8>; break;
    }
  }
  // items in reverse so the long (late-position) rows start first
  const size_t n_items = blocks.size() * kv.kv_heads;
  parallel_for_dynamic(pool, n_items, 1, [&](size_t b, size_t e) {
    thread_local std::vector<float> kf, vf, scores;
    for (size_t it = b; it < e; ++it) {
      size_t rit = n_items - 1 - it;
      const Item& bl = blocks[rit / kv.kv_heads];
      int g = (int)(rit % kv.kv_heads);
      const AttnSegment& sg = segs[bl.seg];
      int n_keys_max = sg.pos0 + bl.row0 + bl.rows;
      if (kf.size() < (size_t)n_keys_max * D) {
        kf.resize((size_t)n_keys_max * D);
        vf.resize((size_t)n_keys_max * D);
      }
      if (scores.size() < (size_t)n_keys_max + 16) scores.resize((size_t)n_keys_max + 16);
      if (kv.dtype == F32) gather_kv<F32>(kf.data(), vf.data(), pages, kv, layer, g, sg.block_table, n_keys_max);
      else gather_kv<F16>(kf.data(), vf.data(), pages, kv, layer, g, sg.block_table, n_keys_max);
      for (int r = 0; r < bl.rows; ++r) {
        size_t row = (size_t)sg.q_row0 + bl.row0 + r;
        int n_keys = sg.pos0 + bl.row0 + r + 1;
        for (int h = g * group; h < (g + 1) * group; ++h)
          row_fn(out + row * stride + (size_t)h * D, q + row * stride + (size_t)h * D, kf.data(), vf.data(), D, n_keys,
                 scale, scores.data());
      }
    }
  });
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
