// Reference twin of dsv4_indexer_topk (see dsv4-indexer.h): one thread, one
// (token, key, head) at a time, plain loops. Also the shared heap select.
#include <vector>

#include "dsv4-indexer.h"

namespace kvt {
namespace {

// libstdc++'s __adjust_heap / __push_heap with comp(a, b) = s[a] > s[b]
struct Heap {
  int32_t* id;
  const float* s;
  bool comp(int32_t a, int32_t b) const { return s[a] > s[b]; }
  void push(int hole, int top, int32_t value) {
    int parent = (hole - 1) / 2;
    while (hole > top && comp(id[parent], value)) {
      id[hole] = id[parent];
      hole = parent;
      parent = (hole - 1) / 2;
    }
    id[hole] = value;
  }
  void adjust(int hole, int len, int32_t value) {
    const int top = hole;
    int child = hole;
    while (child < (len - 1) / 2) {
      child = 2 * (child + 1);
      if (comp(id[child], id[child - 1])) child--;
      id[hole] = id[child];
      hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
      child = 2 * (child + 1);
      id[hole] = id[child - 1];
      hole = child - 1;
    }
    push(hole, top, value);
  }
};

}  // namespace

void dsv4_indexer_select(int32_t* ids, const float* s, int n, int k) {
  for (int i = 0; i < n; ++i) ids[i] = i;
  Heap hp{ids, s};
  if (k >= 2)
    for (int parent = (k - 2) / 2;; --parent) {
      hp.adjust(parent, k, ids[parent]);
      if (parent == 0) break;
    }
  for (int i = k; i < n; ++i) {
    if (hp.comp(ids[i], ids[0])) {
      const int32_t value = ids[i];
      ids[i] = ids[0];
      hp.adjust(0, k, value);
    }
  }
}

void dsv4_indexer_topk_ref(int32_t* sel, const float* q, const float* w, const float* keys, const int32_t* n, int T, int H, int D, int k,
                           double scale) {
  std::vector<float> s;
  std::vector<int32_t> ids;
  for (int t = 0; t < T; ++t) {
    int32_t* out = sel + (size_t)t * k;
    const int nt = n[t];
    if (nt <= k) {
      for (int j = 0; j < nt; ++j) out[j] = j;
      continue;
    }
    s.resize(nt);
    ids.resize(nt);
    const float* qt = q + (size_t)t * H * D;
    const float* wt = w + (size_t)t * H;
    for (int j = 0; j < nt; ++j) {
      const float* kj = keys + (size_t)j * D;
      double acc = 0;
      for (int h = 0; h < H; ++h) {
        double dot = 0;
        for (int i = 0; i < D; ++i) dot += (double)qt[(size_t)h * D + i] * (double)kj[i];
        if (dot > 0) acc += dot * (double)wt[h] * scale;
      }
      s[j] = (float)acc;
    }
    dsv4_indexer_select(ids.data(), s.data(), nt, k);
    for (int j = 0; j < k; ++j) out[j] = ids[j];
  }
}

}  // namespace kvt
