// Reference twin of sample_masked (sample-masked.h): the law as written —
// collect A, sort it (x descending, lower id first), cut, draw by id.
#include <algorithm>
#include <vector>

#include "sample-masked.h"

namespace kvt {

int32_t sample_masked_ref(const float* x, const uint32_t* mask, int n, const SampleParams& p) {
  std::vector<int32_t> a;
  for (int i = 0; i < n; ++i)
    if (!mask || (mask[i >> 5] >> (i & 31)) & 1u) a.push_back(i);
  if (a.empty()) return -1;
  float m = -INFINITY;
  for (int32_t i : a) m = x[i] > m ? x[i] : m;
  if (!(m > -INFINITY)) return a[0];
  std::vector<uint64_t> W((size_t)n, 0);
  for (int32_t i : a) W[i] = sample_weight(exp_kvt((x[i] - m) * p.inv_t));
  std::vector<int32_t> order = a;
  std::sort(order.begin(), order.end(), [&](int32_t u, int32_t v) { return x[u] > x[v] || (x[u] == x[v] && u < v); });
  size_t k = p.top_k > 0 && (size_t)p.top_k < order.size() ? (size_t)p.top_k : order.size();
  if (p.top_p < 1.0) {
    uint64_t s = 0;
    for (size_t j = 0; j < k; ++j) s += W[order[j]];
    const uint64_t t = (uint64_t)std::ceil(p.top_p * (double)s);
    uint64_t cum = 0;
    for (size_t j = 0; j < k; ++j) {
      cum += W[order[j]];
      if (cum >= t) {
        k = j + 1;
        break;
      }
    }
  }
  std::vector<char> kept((size_t)n, 0);
  uint64_t total = 0;
  for (size_t j = 0; j < k; ++j) {
    kept[order[j]] = 1;
    total += W[order[j]];
  }
  const uint64_t target = (uint64_t)(((unsigned __int128)p.u * total) >> 64);
  uint64_t acc = 0;
  for (int32_t i : a) {
    if (!kept[i]) continue;
    acc += W[i];
    if (acc > target) return i;
  }
  return -1;
}

}  // namespace kvt
