#include "cpu-checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

#include "../q8-repack.h"
#include "../ref/half-ref.h"
#include "../ref/llama-ref.h"
#include "gguf-writer.h"
#include "host-model.h"

namespace kvt_driver {
namespace {

using namespace kvt_ref;

void check_half(Report& rep) {
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) continue;  // inf/nan
    if (float_to_half(half_to_float((uint16_t)h)) != h) ++bad;
    const uint16_t up = (uint16_t)(h + 1);
    if ((h & 0x7fff) == 0x7bff || (h & 0x7fff) == 0x7fff) continue;
    const float mid = (half_to_float((uint16_t)h) + half_to_float(up)) * 0.5f;
    if (float_to_half(mid) != ((h & 1) ? up : (uint16_t)h)) ++bad;  // ties to even
  }
  rep.expect_le("cpu/f16 round trip + ties-to-even (all halves)", bad, 0);
  int bad_bf = 0;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if (((b >> 7) & 0xff) == 0xff) continue;
    if (float_to_bf16(bf16_to_float((uint16_t)b)) != b) ++bad_bf;
  }
  rep.expect_le("cpu/bf16 round trip (all bf16)", bad_bf, 0);
}

void check_q8_repack(Report& rep) {
  Rng rng(7);
  HostWeight w = random_weight(KVT_Q8_0, 5, 96, rng, 0.3f);
  std::vector<int8_t> qs(5 * 96);
  std::vector<uint16_t> sc(5 * 3);
  kvt_cuda::q8_0_repack(qs.data(), sc.data(), reinterpret_cast<const kvt_block_q8_0*>(w.raw.data()), 5, 96);
  int bad = 0;
  for (int n = 0; n < 5; ++n)
    for (int k = 0; k < 96; ++k)
      if (half_to_float(sc[n * 3 + k / 32]) * qs[n * 96 + k] != w.at(n, k)) ++bad;
  rep.expect_le("cpu/q8_0 repack keeps every value", bad, 0);
}

// Paged attention (via a shuffled block table) against a dense formulation.
void check_paged_attention(Report& rep) {
  const int layers = 2, n_kv = 2, hd = 64, n_head = 8, P = 200, T = 9, pos0 = P - T;
  const int n_blocks = (P + 63) / 64, n_pages = 7;
  const size_t page_elems = (size_t)layers * 2 * n_kv * 64 * hd;
  std::vector<uint16_t> pages(page_elems * n_pages, 0);
  std::vector<int32_t> table = {5, 2, 6, 0};
  HostPagedKv kv{pages.data(), page_elems, table.data(), n_blocks, layers, n_kv, hd};
  Rng rng(11);
  std::vector<float> k((size_t)P * n_kv * hd), v(k.size()), q((size_t)T * n_head * hd);
  fill_uniform(k, rng, 1.f);
  fill_uniform(v, rng, 1.f);
  fill_uniform(q, rng, 2.f);
  kv_write(kv, k.data(), v.data(), 1, P, 0);
  std::vector<float> out(q.size()), dense(q.size());
  const float scale = 1.f / 8.f;
  attention(out.data(), q.data(), kv, 1, T, n_head, pos0, scale);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < n_head; ++h) {
      const int kvh = h / (n_head / n_kv), pos = pos0 + t;
      std::vector<double> s(pos + 1);
      double mx = -1e300, den = 0;
      for (int j = 0; j <= pos; ++j) {
        double d = 0;
        for (int c = 0; c < hd; ++c)
          d += (double)q[((size_t)t * n_head + h) * hd + c] * round_half(k[((size_t)j * n_kv + kvh) * hd + c]);
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
      }
      for (auto& x : s) den += (x = std::exp(x - mx));
      for (int c = 0; c < hd; ++c) {
        double a = 0;
        for (int j = 0; j <= pos; ++j) a += s[j] * round_half(v[((size_t)j * n_kv + kvh) * hd + c]);
        dense[((size_t)t * n_head + h) * hd + c] = (float)(a / den);
      }
    }
  rep.expect_le("cpu/paged attention == dense attention", rel_err(out.data(), dense.data(), out.size()),
                1e-6);
  // Layer 0 of every page was never written: the layer offset is honoured.
  bool untouched = true;
  for (int p : table)
    for (size_t i = 0; i < page_elems / 2; ++i) untouched &= pages[(size_t)p * page_elems + i] == 0;
  rep.expect_true("cpu/kv_write touches only its layer", untouched);
}

kvt_llama_config tiny_config() {
  kvt_llama_config c{};
  c.n_vocab = 256; c.d_model = 128; c.n_layer = 2; c.n_head = 4; c.n_kv_head = 2; c.head_dim = 64;
  c.d_ffn = 256; c.rms_eps = 1e-5f; c.rope_base = 10000.f; c.rope_mode = KVT_ROPE_NORMAL;
  return c;
}

// Importing cached pages and prefilling the suffix gives the full prefill's answer.
void check_ref_cache_equivalence(Report& rep) {
  const kvt_llama_config c = tiny_config();
  const HostLlama m = random_llama(c, KVT_F16, 3);
  const int P = 232, cached_blocks = 3, cached = cached_blocks * 64;
  Rng rng(5);
  std::vector<int32_t> tokens(P);
  for (auto& t : tokens) t = (int32_t)(rng.next() % c.n_vocab);
  const size_t page_elems = llama_page_bytes(c) / 2;
  std::vector<uint16_t> pool(page_elems * 10, 0);
  std::vector<int32_t> table_a = {0, 1, 2, 3}, table_b = {9, 5, 7, 8};
  HostPagedKv kva{pool.data(), page_elems, table_a.data(), 4, c.n_layer, c.n_kv_head, c.head_dim};
  HostPagedKv kvb{pool.data(), page_elems, table_b.data(), 4, c.n_layer, c.n_kv_head, c.head_dim};
  std::vector<float> la(c.n_vocab), lb(c.n_vocab);
  llama_forward(la.data(), m, kva, tokens.data(), P, 0, false);
  for (int i = 0; i < cached_blocks; ++i)  // "import": one contiguous copy per block
    std::memcpy(&pool[(size_t)table_b[i] * page_elems], &pool[(size_t)table_a[i] * page_elems],
                page_elems * 2);
  llama_forward(lb.data(), m, kvb, tokens.data() + cached, P - cached, cached, false);
  rep.expect_le("cpu/ref import+suffix == full prefill (logits)", rel_err(lb.data(), la.data(), la.size()),
                0.0, "bit-exact expected: same per-row arithmetic");
}

void check_gguf_round_trip(Report& rep) {
  kvt_llama_config c = tiny_config();
  for (int type : {KVT_F16, KVT_Q8_0, KVT_BF16}) {
    const HostLlama m = random_llama(c, type, 9);
    char path[] = "/tmp/kvt-gguf-XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    bool ok = false;
    std::string why;
    try {
      write_gguf_llama(path, m);
      const HostLlama r = read_gguf_llama(path);
      ok = std::memcmp(&r.cfg, &m.cfg, sizeof c) == 0 && r.tok_embd.raw == m.tok_embd.raw &&
           r.output.raw == m.output.raw && r.output_norm == m.output_norm &&
           r.layers[1].w_down.raw == m.layers[1].w_down.raw &&
           r.layers[1].attn_norm == m.layers[1].attn_norm && r.layers[0].wq.type == type;
      if (!ok) why = "tensor or config mismatch";
    } catch (const std::exception& e) {
      why = e.what();
    }
    std::remove(path);
    rep.expect_true("cpu/gguf write→read round trip type " + std::to_string(type), ok, why);
  }
}

}  // namespace

void run_cpu_checks(Report& rep) {
  check_half(rep);
  check_q8_repack(rep);
  check_paged_attention(rep);
  check_ref_cache_equivalence(rep);
  check_gguf_round_trip(rep);
}

}  // namespace kvt_driver
