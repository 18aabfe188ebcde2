// The sampler's draw (sample-masked.h): the per-ISA passes (sample-masked.cc,
// picked by the active kernel table's ISA), then the top-k / top-p cut and the
// draw, without sorting A:
//   no cut   the block sums give the total; the draw walks block sums, then the
//            16 weights of one block
//   cut      ids go into 4096 buckets by (m − x)·scale (monotone in x, so the
//            order "x descending" runs bucket by bucket); counts and ΣW per
//            bucket find the bucket that holds the cut, and only that bucket's
//            ids are sorted. The cut element (x_c, id_c) then defines K:
//            x > x_c, or x == x_c and id ≤ id_c.
// Every sum is of exact integers, so the result is the twin's bit for bit.
#include <algorithm>
#include <cstring>
#include <vector>

#include "../dispatch.h"
#include "sample-masked.h"

namespace kvt {
namespace isa_scalar {
void sample_scan(const float*, const uint32_t*, int, float*, float*, int*);
void sample_weights(float*, double*, const float*, const uint32_t*, int, float, float);
}
namespace isa_avx2 {
void sample_scan(const float*, const uint32_t*, int, float*, float*, int*);
void sample_weights(float*, double*, const float*, const uint32_t*, int, float, float);
}
namespace isa_avx512 {
void sample_scan(const float*, const uint32_t*, int, float*, float*, int*);
void sample_weights(float*, double*, const float*, const uint32_t*, int, float, float);
}

void sample_scan(const float* x, const uint32_t* mask, int n, float* mx, float* mn, int* count) {
  const char* isa = active_kernels().isa;
  auto fn = std::strcmp(isa, "avx512") == 0 ? isa_avx512::sample_scan
            : std::strcmp(isa, "avx2") == 0 ? isa_avx2::sample_scan
                                            : isa_scalar::sample_scan;
  fn(x, mask, n, mx, mn, count);
}

void sample_weights(float* w, double* blocks, const float* x, const uint32_t* mask, int n, float m, float inv_t) {
  const char* isa = active_kernels().isa;
  auto fn = std::strcmp(isa, "avx512") == 0 ? isa_avx512::sample_weights
            : std::strcmp(isa, "avx2") == 0 ? isa_avx2::sample_weights
                                            : isa_scalar::sample_weights;
  fn(w, blocks, x, mask, n, m, inv_t);
}

namespace {
constexpr int kBuckets = 4096;

inline uint64_t mul_hi(uint64_t a, uint64_t b) { return (uint64_t)(((unsigned __int128)a * b) >> 64); }

inline int lowest_allowed(const uint32_t* mask, int n) {
  if (!mask) return 0;
  for (int w = 0; w < (n + 31) / 32; ++w)
    if (mask[w]) return w * 32 + __builtin_ctz(mask[w]);
  return -1;
}

// Calls f(id) for every allowed id, ascending, until f returns true.
template <typename F>
inline void for_allowed(const uint32_t* mask, int n, F&& f) {
  if (!mask) {
    for (int i = 0; i < n; ++i)
      if (f(i)) return;
    return;
  }
  const int words = (n + 31) / 32;
  for (int wd = 0; wd < words; ++wd) {
    uint32_t bits = mask[wd];
    if (wd == words - 1 && (n & 31)) bits &= (1u << (n & 31)) - 1u;
    while (bits) {
      if (f(wd * 32 + __builtin_ctz(bits))) return;
      bits &= bits - 1;
    }
  }
}

struct Scratch {
  std::vector<float> w;
  std::vector<double> blocks;
  std::vector<uint16_t> bucket;
  std::vector<uint32_t> cnt;
  std::vector<uint64_t> ws;
  std::vector<int32_t> ids;
};
thread_local Scratch scratch;

// The cut: walks buckets to the one where `reached(count so far, ΣW so far, bucket)` first holds, sorts
// that bucket, and walks its ids until `reached` holds for the prefix ending at an id. Returns that id
// and sets *prefix to ΣW through it; -1 when no prefix reaches.
template <typename R>
int32_t locate(const float* x, const uint32_t* mask, int n, Scratch& s, R&& reached, uint64_t* prefix) {
  std::vector<int32_t>* const out = &s.ids;
  uint64_t cum_w = 0;
  uint32_t cum_c = 0;
  for (int b = 0; b < kBuckets; ++b) {
    if (s.cnt[b] == 0 || !reached(cum_c + s.cnt[b], cum_w + s.ws[b])) {
      cum_c += s.cnt[b];
      cum_w += s.ws[b];
      continue;
    }
    std::vector<int32_t>& ids = *out;
    ids.clear();
    const uint16_t* const bucket = s.bucket.data();
    for_allowed(mask, n, [&](int i) {
      if (bucket[i] == b) ids.push_back(i);
      return false;
    });
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t c) { return x[a] > x[c] || (x[a] == x[c] && a < c); });
    const float* const w = s.w.data();
    for (int32_t id : ids) {
      cum_c += 1;
      cum_w += sample_weight(w[id]);
      if (reached(cum_c, cum_w)) {
        *prefix = cum_w;
        return id;
      }
    }
    return -1;
  }
  return -1;
}
}  // namespace

int32_t sample_masked(const float* x, const uint32_t* mask, int n, const SampleParams& p) {
  float m, mn;
  int count;
  sample_scan(x, mask, n, &m, &mn, &count);
  if (count == 0) return -1;
  if (!(m > -INFINITY)) return lowest_allowed(mask, n);  // every allowed logit is -inf: no weights to draw by
  Scratch& s = scratch;
  s.w.resize((size_t)n);
  s.blocks.resize((size_t)(n + 15) / 16);
  sample_weights(s.w.data(), s.blocks.data(), x, mask, n, m, p.inv_t);
  const bool cut = (p.top_k > 0 && p.top_k < count) || p.top_p < 1.0;
  if (!cut) {
    uint64_t total = 0;
    for (double b : s.blocks) total += (uint64_t)b;
    const uint64_t target = mul_hi(p.u, total);
    uint64_t acc = 0;
    for (size_t b = 0; b < s.blocks.size(); ++b) {
      const uint64_t bw = (uint64_t)s.blocks[b];
      if (acc + bw > target) {
        const int end = std::min(n, (int)(b * 16 + 16));
        for (int i = (int)b * 16; i < end; ++i) {
          acc += sample_weight(s.w[i]);
          if (acc > target) return i;
        }
      }
      acc += bw;
    }
    return -1;  // unreachable: target < total
  }
  // Buckets by distance from the max (ties share a bucket; larger x, smaller bucket).
  const double span = (double)m - (double)mn;
  const double scale = span > 0 && std::isfinite(span) ? kBuckets / span : 0.0;
  s.bucket.resize((size_t)n);
  s.cnt.assign(kBuckets, 0);
  s.ws.assign(kBuckets, 0);
  // Raw pointers: the scratch is thread-local, and its address must not be looked up per id.
  uint16_t* const bucket = s.bucket.data();
  uint32_t* const cnt = s.cnt.data();
  uint64_t* const ws = s.ws.data();
  const float* const w = s.w.data();
  for_allowed(mask, n, [&](int i) {
    const double d = (double)(m - x[i]) * scale;
    const int b = d < kBuckets - 1 ? (int)d : kBuckets - 1;  // NaN (−inf·0) and beyond: the last bucket
    bucket[i] = (uint16_t)b;
    cnt[b] += 1;
    ws[b] += sample_weight(w[i]);
    return false;
  });
  const uint32_t k_eff = p.top_k > 0 && p.top_k < count ? (uint32_t)p.top_k : (uint32_t)count;
  uint64_t total = 0;
  int32_t cut_id = -1;
  if (k_eff < (uint32_t)count) {
    cut_id = locate(x, mask, n, s, [&](uint32_t c, uint64_t) { return c >= k_eff; }, &total);
  } else {
    for (int b = 0; b < kBuckets; ++b) total += s.ws[b];
  }
  if (p.top_p < 1.0) {
    // The fewest first ids whose ΣW reaches T, and never more than k' (T above S after rounding: k' stays).
    const uint64_t T = (uint64_t)std::ceil(p.top_p * (double)total);
    cut_id = locate(x, mask, n, s, [&](uint32_t c, uint64_t wsum) { return wsum >= T || c >= k_eff; }, &total);
  }
  const uint64_t target = mul_hi(p.u, total);
  uint64_t acc = 0;
  const float xc = cut_id >= 0 ? x[cut_id] : -INFINITY;
  int32_t found = -1;
  for_allowed(mask, n, [&](int i) {
    if (cut_id >= 0 && !(x[i] > xc || (x[i] == xc && i <= cut_id))) return false;
    acc += sample_weight(w[i]);
    if (acc <= target) return false;
    found = i;
    return true;
  });
  return found;
}

}  // namespace kvt
