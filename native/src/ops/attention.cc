// Causal GQA attention over paged KV, per ISA.
//   q, out : [rows][n_heads][head_dim]   rows = Σ segs[s].n_q, in segment order
//   pages  : KV pool, page[layer][K|V][kv_head][64][head_dim] (f16 or f32)
//   query i of segment s sits at position pos0+i and attends keys [0, pos0+i]
//   kv head of head h = h / (n_heads / kv_heads)
// One (row, head) is one work item, computed by one thread start to finish:
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

template <int KD>
inline V16 load_kv(const void* base, size_t idx, int n) {
  if constexpr (KD == F32) {
    const float* p = static_cast<const float*>(base) + idx;
    return n >= 16 ? load(p) : load_n(p, n);
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(base) + idx;
    return n >= 16 ? load_f16(p) : load_f16_n(p, n);
  }
}

template <int KD>
static void attend_one(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int kvh,
                       const int32_t* table, int n_keys, float scale, std::vector<float>& scores) {
  const int D = kv.head_dim;
  const size_t page_elems = kv.page_elems();
  scores.resize((size_t)n_keys + 16);
  float* s = scores.data();
  for (int j = 0; j < n_keys; ++j) {
    size_t base = (size_t)table[j / kPageTokens] * page_elems + kv.offset(layer, 0, kvh, j % kPageTokens);
    V16 acc = zero();
    for (int c = 0; c < D; c += 16) {
      int n = D - c;
      V16 qv = n >= 16 ? load(q + c) : load_n(q + c, n);
      acc = fma(qv, load_kv<KD>(pages, base + c, n), acc);
    }
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
  constexpr int kMaxChunks = 16;  // head_dim <= 256 (checked by the binding)
  V16 o[kMaxChunks];
  const int chunks = (D + 15) / 16;
  for (int c = 0; c < chunks; ++c) o[c] = zero();
  for (j = 0; j < n_keys; ++j) {
    size_t base = (size_t)table[j / kPageTokens] * page_elems + kv.offset(layer, 1, kvh, j % kPageTokens);
    V16 e = set1(s[j]);
    for (int c = 0; c < chunks; ++c) o[c] = fma(e, load_kv<KD>(pages, base + c * 16, D - c * 16), o[c]);
  }
  V16 vi = set1(inv);
  for (int c = 0; c < chunks; ++c) store_n(out + c * 16, mul(o[c], vi), D - c * 16);
}

void attention(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
               float scale, const AttnSegment* segs, int n_segs, ThreadPool& pool) {
  std::vector<int> row_seg;
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].n_q; ++i) row_seg.push_back(s);
  const size_t rows = row_seg.size();
  const int group = n_heads / kv.kv_heads;
  const size_t stride = (size_t)n_heads * kv.head_dim;
  parallel_for_dynamic(pool, rows * n_heads, 4, [&](size_t b, size_t e) {
    thread_local std::vector<float> scores;
    for (size_t it = b; it < e; ++it) {
      size_t row = it / n_heads;
      int h = (int)(it % n_heads);
      const AttnSegment& sg = segs[row_seg[row]];
      int i = (int)row - sg.q_row0;
      int n_keys = sg.pos0 + i + 1;
      const float* qh = q + row * stride + (size_t)h * kv.head_dim;
      float* oh = out + row * stride + (size_t)h * kv.head_dim;
      if (kv.dtype == F32)
        attend_one<F32>(oh, qh, pages, kv, layer, h / group, sg.block_table, n_keys, scale, scores);
      else
        attend_one<F16>(oh, qh, pages, kv, layer, h / group, sg.block_table, n_keys, scale, scores);
    }
  });
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
