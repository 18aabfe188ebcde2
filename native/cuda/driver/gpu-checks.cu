#include "gpu-checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../cuda-backend-internal.h"
#include "../ref/half-ref.h"
#include "../ref/llama-ref.h"
#include "host-model.h"

namespace kvt_driver {
namespace {

using kvt_ref::HostWeight;

template <typename T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) { cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)); }
  DevBuf(const std::vector<T>& h) : DevBuf(h.size()) { up(h); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  void up(const std::vector<T>& h) { cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> down() const {
    std::vector<T> h(n);
    cudaDeviceSynchronize();
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

std::string name_of(int type) {
  switch (type) {
    case KVT_F32: return "f32";
    case KVT_F16: return "f16";
    case KVT_BF16: return "bf16";
    default: return "q8_0";
  }
}

// Launch status of a kernel, folded into the report (a failed launch is a failed check).
bool launched(Report& rep, const std::string& name, cudaError_t e) {
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) rep.expect_true(name + " (launch)", false, cudaGetErrorString(e));
  return e == cudaSuccess;
}

kvt_cuda::DeviceWeight upload(Report& rep, kvt_cuda_ctx* ctx, const HostWeight& w) {
  int32_t id = -1;
  if (kvt_cuda_weight_upload(ctx, w.type, w.rows, w.cols, w.raw.data(), &id) != KVT_CUDA_OK) {
    rep.expect_true("weight upload", false, kvt_cuda_last_error(ctx));
    return kvt_cuda::DeviceWeight{};
  }
  return ctx->weights[id];
}

void check_matmul(Report& rep, kvt_cuda_ctx* ctx) {
  struct Shape { int m, n, k; };
  const Shape shapes[] = {{1, 72, 256}, {3, 40, 96}, {8, 130, 512}, {9, 64, 64},
                          {17, 96, 256}, {64, 64, 64}, {130, 200, 320}};
  Rng rng(21);
  for (int type : {KVT_F16, KVT_BF16, KVT_Q8_0, KVT_F32})
    for (const Shape& s : shapes)
      for (int acc = 0; acc < 2; ++acc) {
        if (acc && s.m != 17 && s.m != 3) continue;
        const HostWeight w = random_weight(type, s.n, s.k, rng, 0.5f);
        std::vector<float> x((size_t)s.m * s.k), y0((size_t)s.m * s.n);
        fill_uniform(x, rng, 1.f);
        fill_uniform(y0, rng, 1.f);
        const kvt_cuda::DeviceWeight dw = upload(rep, ctx, w);
        DevBuf<float> dx(x), dy(y0);
        const std::string name = "gpu/matmul " + name_of(type) + " M" + std::to_string(s.m) + " N" +
                                 std::to_string(s.n) + " K" + std::to_string(s.k) + (acc ? " +=" : "");
        if (!launched(rep, name, kvt_cuda::launch_matmul(dy.p, dx.p, dw, s.m, acc, 0))) continue;
        std::vector<float> ref = y0;
        kvt_ref::matmul(ref.data(), x.data(), w, s.m, acc);
        const bool tensor_cores = type != KVT_F32;
        rep.expect_le(name, rel_err(dy.down().data(), ref.data(), ref.size()), tensor_cores ? 1e-3 : 1e-5,
                      !tensor_cores ? "gemv" : s.m <= kvt_cuda::kSkinnyMaxM ? "wmma skinny" : "wmma tiled");
        if (type != KVT_F32 && !acc) {
          std::vector<float> gv(ref.size());
          DevBuf<float> dg(gv.size());
          if (launched(rep, name + " (gemv twin)", kvt_cuda::launch_gemv(dg.p, dx.p, dw, std::min(s.m, 8), false, 0))) {
            std::vector<float> gref((size_t)std::min(s.m, 8) * s.n);
            kvt_ref::gemv(gref.data(), x.data(), w, std::min(s.m, 8), false);
            rep.expect_le(name + " gemv", rel_err(dg.down().data(), gref.data(), gref.size()), 1e-5);
          }
        }
      }
  // A row's result must not depend on how many rows share the call
  // (skinny vs tiled kernel, tile position): compare bit for bit.
  for (int type : {KVT_F16, KVT_BF16, KVT_Q8_0, KVT_F32}) {
    const int M = 130, N = 200, K = 320;
    const HostWeight w = random_weight(type, N, K, rng, 0.5f);
    std::vector<float> x((size_t)M * K);
    fill_uniform(x, rng, 1.f);
    const kvt_cuda::DeviceWeight dw = upload(rep, ctx, w);
    DevBuf<float> dx(x), dall((size_t)M * N);
    const std::string name = "gpu/matmul " + name_of(type) + " row results independent of M";
    if (!launched(rep, name, kvt_cuda::launch_matmul(dall.p, dx.p, dw, M, false, 0))) continue;
    const std::vector<float> all = dall.down();
    int mismatches = 0;
    for (int m : {1, 2, 5, 8, 9, 16, 17, 64, 65}) {
      const int r0 = 130 - m - 1;  // rows r0.. r0+m-1, not tile-aligned
      DevBuf<float> dpart((size_t)m * N);
      if (!launched(rep, name, kvt_cuda::launch_matmul(dpart.p, dx.p + (size_t)r0 * K, dw, m, false, 0))) break;
      const std::vector<float> part = dpart.down();
      mismatches += std::memcmp(part.data(), all.data() + (size_t)r0 * N, part.size() * 4) != 0;
    }
    rep.expect_le(name, mismatches, 0, "M in {1,2,5,8,9,16,17,64,65} vs rows of M=130");
  }
}

void check_small_ops(Report& rep) {
  Rng rng(31);
  {  // rmsnorm
    const int t = 5, d = 1000;
    std::vector<float> x((size_t)t * d), w(d);
    fill_uniform(x, rng, 2.f);
    fill_uniform(w, rng, 1.f);
    DevBuf<float> dx(x), dw(w), dy(x.size());
    if (launched(rep, "gpu/rmsnorm", kvt_cuda::launch_rmsnorm(dy.p, dx.p, dw.p, t, d, 1e-5f, 0))) {
      std::vector<float> ref(x.size());
      kvt_ref::rmsnorm(ref.data(), x.data(), w.data(), t, d, 1e-5f);
      rep.expect_le("gpu/rmsnorm T5 d1000", rel_err(dy.down().data(), ref.data(), ref.size()), 1e-5);
    }
  }
  for (int hd : {64, 128})
    for (int mode : {KVT_ROPE_NORMAL, KVT_ROPE_NEOX})
      for (int rot : {hd, hd / 2}) {  // rope, full and partial rotary
        const int rows = 7, heads = 4;
        std::vector<float> x((size_t)rows * heads * hd);
        fill_uniform(x, rng, 1.f);
        std::vector<int32_t> pos = {0, 1, 63, 64, 5000, 31999, 7};
        DevBuf<float> dx(x);
        DevBuf<int32_t> dpos(pos);
        const std::string name = std::string("gpu/rope ") + (mode ? "neox" : "normal") + " hd" + std::to_string(hd) +
                                 " rot" + std::to_string(rot);
        if (!launched(rep, name, kvt_cuda::launch_rope(dx.p, dpos.p, rows, heads, hd, rot, 10000.f, mode, 0))) continue;
        kvt_ref::rope(x.data(), pos.data(), rows, heads, hd, rot, 10000.f, mode);
        rep.expect_le(name, rel_err(dx.down().data(), x.data(), x.size()), 1e-5);
      }
  {  // swiglu + add
    const size_t n = 10007;
    std::vector<float> g(n), u(n);
    fill_uniform(g, rng, 6.f);
    fill_uniform(u, rng, 1.f);
    DevBuf<float> dg(g), du(u), dout(n);
    if (launched(rep, "gpu/swiglu", kvt_cuda::launch_swiglu(dout.p, dg.p, du.p, n, 0))) {
      std::vector<float> ref(n);
      kvt_ref::swiglu(ref.data(), g.data(), u.data(), n);
      rep.expect_le("gpu/swiglu n10007", rel_err(dout.down().data(), ref.data(), n), 1e-6);
    }
    if (launched(rep, "gpu/add", kvt_cuda::launch_add(dg.p, dg.p, du.p, n, 0))) {
      kvt_ref::add(g.data(), g.data(), u.data(), n);
      rep.expect_le("gpu/add n10007", rel_err(dg.down().data(), g.data(), n), 0.0);
    }
  }
  {  // softmax + argmax
    const int rows = 4, n = 3000;
    std::vector<float> x((size_t)rows * n);
    fill_uniform(x, rng, 8.f);
    x[2 * n + 100] = 50.f;
    x[2 * n + 2000] = 50.f;  // a tie: the lowest index wins
    DevBuf<float> dx(x);
    DevBuf<int32_t> di(rows);
    if (launched(rep, "gpu/argmax", kvt_cuda::launch_argmax(di.p, dx.p, rows, n, 0))) {
      std::vector<int32_t> ref(rows);
      kvt_ref::argmax(ref.data(), x.data(), rows, n);
      rep.expect_true("gpu/argmax rows4 n3000 (tie → lowest)", di.down() == ref);
    }
    if (launched(rep, "gpu/softmax", kvt_cuda::launch_softmax(dx.p, rows, n, 0))) {
      kvt_ref::softmax(x.data(), rows, n);
      rep.expect_le("gpu/softmax rows4 n3000", rel_err(dx.down().data(), x.data(), x.size()), 1e-5);
    }
  }
}

void check_embed(Report& rep, kvt_cuda_ctx* ctx) {
  Rng rng(41);
  for (int type : {KVT_F32, KVT_F16, KVT_BF16, KVT_Q8_0}) {
    const int vocab = 50, d = 96, t = 6;
    const HostWeight w = random_weight(type, vocab, d, rng, 1.f);
    std::vector<int32_t> toks = {0, 49, 7, 7, 23, 1};
    const kvt_cuda::DeviceWeight dw = upload(rep, ctx, w);
    DevBuf<int32_t> dt(toks);
    DevBuf<float> dout((size_t)t * d);
    const std::string name = "gpu/embed " + name_of(type);
    if (!launched(rep, name, kvt_cuda::launch_embed(dout.p, dw, dt.p, t, 0))) continue;
    std::vector<float> ref((size_t)t * d);
    kvt_ref::embed(ref.data(), w, toks.data(), t);
    rep.expect_le(name, rel_err(dout.down().data(), ref.data(), ref.size()), 0.0);
  }
}

// kv_write bit-exact against its twin, then attention against the reference
// on shuffled block tables, prefill tiles and split-K decode.
void check_attention(Report& rep, kvt_cuda_ctx* ctx) {
  struct Case { int hd, n_head, n_kv, t, pos0; };
  const Case cases[] = {{64, 8, 2, 100, 0},    {128, 4, 4, 37, 130}, {64, 32, 4, 1, 3000},
                        {128, 16, 2, 3, 700},  {64, 4, 1, 70, 64},   {128, 8, 8, 1, 63}};
  Rng rng(51);
  for (const Case& c : cases) {
    const int layers = 2, layer = 1, P = c.pos0 + c.t, n_blocks = (P + 63) / 64;
    const int n_pages = n_blocks + 3;
    const size_t page_elems = (size_t)layers * 2 * c.n_kv * 64 * c.hd;
    std::vector<int32_t> table(n_blocks);
    std::iota(table.begin(), table.end(), 0);
    for (int i = n_blocks - 1; i > 0; --i) std::swap(table[i], table[rng.next() % (i + 1)]);
    for (auto& p : table) p = (p + 3) % n_pages;  // avoid the identity mapping
    std::vector<float> k((size_t)P * c.n_kv * c.hd), v(k.size()), q((size_t)c.t * c.n_head * c.hd);
    fill_uniform(k, rng, 1.f);
    fill_uniform(v, rng, 1.f);
    fill_uniform(q, rng, 3.f);
    std::vector<uint16_t> host_pages(page_elems * n_pages, 0);
    kvt_ref::HostPagedKv hkv{host_pages.data(), page_elems, table.data(), n_blocks, layers, c.n_kv, c.hd};
    kvt_ref::kv_write(hkv, k.data(), v.data(), layer, P, 0);

    DevBuf<uint16_t> dpages(host_pages.size());
    cudaMemset(dpages.p, 0, host_pages.size() * 2);
    DevBuf<int32_t> dtable(table);
    DevBuf<float> dk(k), dv(v), dq(q), dout(q.size());
    kvt_cuda::PagedKv kv{reinterpret_cast<__half*>(dpages.p), page_elems, dtable.p, n_blocks, layers, c.n_kv, c.hd};
    const std::string tag = " hd" + std::to_string(c.hd) + " H" + std::to_string(c.n_head) + "/" +
                            std::to_string(c.n_kv) + " T" + std::to_string(c.t) + " pos0 " +
                            std::to_string(c.pos0);
    if (!launched(rep, "gpu/kv_write" + tag, kvt_cuda::launch_kv_write(kv, dk.p, dv.p, layer, P, 0, 0))) continue;
    rep.expect_true("gpu/kv_write bit-exact" + tag, dpages.down() == host_pages);

    const size_t ws_bytes = kvt_cuda::attention_workspace_bytes(c.t, c.n_head, c.n_kv, c.hd, c.pos0, ctx->sm_count);
    DevBuf<uint8_t> ws(ws_bytes);
    const float scale = 1.f / std::sqrt((float)c.hd);
    if (!launched(rep, "gpu/attention" + tag,
                  kvt_cuda::launch_attention(dout.p, dq.p, kv, layer, c.t, c.n_head, c.pos0, scale, ws.p,
                                        ws_bytes, ctx->sm_count, 0)))
      continue;
    std::vector<float> ref(q.size());
    kvt_ref::attention(ref.data(), q.data(), hkv, layer, c.t, c.n_head, c.pos0, scale);
    rep.expect_le("gpu/attention" + tag, rel_err(dout.down().data(), ref.data(), ref.size()), 1e-4,
                  ws_bytes ? "split-K" : "single pass");
  }
}

struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<float> first_logits;
};

// Prefill `prompt` then decode n_decode greedy tokens on the GPU.
bool gpu_generate(Report& rep, kvt_cuda_model* model, kvt_cuda_ctx* ctx, const std::vector<int32_t>& prompt,
                  int n_decode, const std::vector<int32_t>& table, int vocab, Greedy* out) {
  out->first_logits.resize(vocab);
  int32_t next = 0;
  if (kvt_cuda_forward(model, prompt.data(), (int)prompt.size(), 0, table.data(), (int)table.size(),
                       out->first_logits.data(), &next, 0) != KVT_CUDA_OK) {
    rep.expect_true("gpu/forward", false, kvt_cuda_last_error(ctx));
    return false;
  }
  int pos = (int)prompt.size();
  for (int i = 0; i < n_decode; ++i) {
    out->tokens.push_back(next);
    int32_t tok = next;
    if (kvt_cuda_forward(model, &tok, 1, pos++, table.data(), (int)table.size(), nullptr, &next, 0) !=
        KVT_CUDA_OK) {
      rep.expect_true("gpu/forward decode", false, kvt_cuda_last_error(ctx));
      return false;
    }
  }
  return true;
}

// Reference greedy run; min_margin is the smallest top1−top2 logit gap seen.
Greedy ref_generate(const kvt_ref::HostLlama& m, const std::vector<int32_t>& prompt, int n_decode,
                    double* min_margin) {
  const kvt_llama_config& c = m.cfg;
  const int P = (int)prompt.size() + n_decode;
  const int n_blocks = (P + 63) / 64;
  const size_t page_elems = kvt_ref::llama_page_bytes(c) / 2;
  std::vector<uint16_t> pool(page_elems * n_blocks, 0);
  std::vector<int32_t> table(n_blocks);
  std::iota(table.begin(), table.end(), 0);
  kvt_ref::HostPagedKv kv{pool.data(), page_elems, table.data(), n_blocks, c.n_layer, c.n_kv_head, c.head_dim};
  Greedy g;
  std::vector<float> logits(c.n_vocab);
  *min_margin = INFINITY;
  auto pick = [&]() {
    std::vector<float> s = logits;
    std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
    *min_margin = std::min(*min_margin, (double)s[0] - s[1]);
    return (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
  };
  kvt_ref::llama_forward(logits.data(), m, kv, prompt.data(), (int)prompt.size(), 0, false);
  g.first_logits = logits;
  int pos = (int)prompt.size();
  for (int i = 0; i < n_decode; ++i) {
    const int32_t tok = pick();
    g.tokens.push_back(tok);
    kvt_ref::llama_forward(logits.data(), m, kv, &tok, 1, pos++, false);
  }
  return g;
}

kvt_cuda_model* load_model(Report& rep, kvt_cuda_ctx* ctx, const kvt_ref::HostLlama& m, const std::string& tag) {
  kvt_cuda_model* model = nullptr;
  if (upload_llama(ctx, m, &model) != KVT_CUDA_OK) {
    rep.expect_true(tag + " upload", false, kvt_cuda_last_error(ctx));
    return nullptr;
  }
  return model;
}

void check_llama(Report& rep, kvt_cuda_ctx* ctx, const kvt_ref::HostLlama& m, const std::string& tag,
                 int prompt_len, int n_decode) {
  Rng rng(61);
  std::vector<int32_t> prompt(prompt_len);
  for (auto& t : prompt) t = (int32_t)(rng.next() % m.cfg.n_vocab);
  const int n_blocks = (prompt_len + n_decode + 63) / 64;
  std::vector<int32_t> table(n_blocks);
  for (int i = 0; i < n_blocks; ++i) table[i] = (i * 7 + 3) % kvt_cuda_kv_page_count(ctx);
  std::sort(table.begin(), table.end());
  table.erase(std::unique(table.begin(), table.end()), table.end());
  if ((int)table.size() != n_blocks) {
    rep.expect_true(tag + " page plan", false, "pool too small");
    return;
  }
  kvt_cuda_model* model = load_model(rep, ctx, m, tag);
  if (!model) return;
  Greedy g;
  const bool ok = gpu_generate(rep, model, ctx, prompt, n_decode, table, m.cfg.n_vocab, &g);
  kvt_cuda_model_destroy(model);
  if (!ok) return;
  double margin;
  const Greedy r = ref_generate(m, prompt, n_decode, &margin);
  // The GEMM rounds its input rows to f16 (bf16 for BF16 weights) on both
  // sides, but the rows themselves differ by accumulated f32 noise, so a
  // rounding can flip: bf16's 8-bit mantissa flips far more often.
  const double tol = m.tok_embd.type == KVT_BF16 ? 3e-2 : 1e-2;
  rep.expect_le(tag + " prefill logits vs CPU reference",
                rel_err(g.first_logits.data(), r.first_logits.data(), r.first_logits.size()), tol);
  int same = 0;
  while (same < n_decode && g.tokens[same] == r.tokens[same]) ++same;
  rep.expect_true(tag + " greedy tokens == CPU reference", same == n_decode,
                  std::to_string(same) + "/" + std::to_string(n_decode) + " equal; min ref top-2 margin " +
                      std::to_string(margin));
}

// Full prefill on pages A vs export(A) → import(B) + suffix prefill on B.
void check_cache_equivalence(Report& rep, kvt_cuda_ctx* ctx, const kvt_ref::HostLlama& m, int suffix) {
  const kvt_llama_config& c = m.cfg;
  const int cached_blocks = 3, cached = cached_blocks * 64, P = cached + suffix, n_decode = 8;
  const std::string tag = "gpu/cache equivalence (suffix " + std::to_string(suffix) + ")";
  Rng rng(71);
  std::vector<int32_t> tokens(P);
  for (auto& t : tokens) t = (int32_t)(rng.next() % c.n_vocab);
  const int n_blocks = (P + n_decode + 63) / 64;
  std::vector<int32_t> table_a(n_blocks), table_b(n_blocks);
  for (int i = 0; i < n_blocks; ++i) table_a[i] = i;
  const int b_pages[] = {9, 5, 6, 12, 13};  // 5,6 a run; 9 alone: both import paths
  for (int i = 0; i < n_blocks; ++i) table_b[i] = b_pages[i];
  kvt_cuda_model* model = load_model(rep, ctx, m, tag);
  if (!model) return;
  const size_t page_bytes = kvt_cuda_kv_page_bytes(ctx), stride = page_bytes + 4096;
  void* pinned = nullptr;
  if (kvt_cuda_host_alloc(ctx, stride * cached_blocks, &pinned) != KVT_CUDA_OK) {
    rep.expect_true(tag, false, kvt_cuda_last_error(ctx));
    kvt_cuda_model_destroy(model);
    return;
  }
  std::vector<float> la(c.n_vocab), lb(c.n_vocab);
  int32_t next_a = 0, next_b = 0;
  bool ok = kvt_cuda_forward(model, tokens.data(), P, 0, table_a.data(), n_blocks, la.data(), &next_a, 0) == KVT_CUDA_OK;
  uint64_t ticket = 0;
  ok = ok && kvt_cuda_kv_export(ctx, table_a.data(), cached_blocks, pinned, stride, &ticket) == KVT_CUDA_OK;
  ok = ok && kvt_cuda_kv_export_wait(ctx, ticket) == KVT_CUDA_OK;
  // Import without waiting: the forward must order itself after each layer's slice.
  ok = ok && kvt_cuda_kv_import(ctx, table_b.data(), cached_blocks, pinned, stride) == KVT_CUDA_OK;
  ok = ok && kvt_cuda_forward(model, tokens.data() + cached, suffix, cached, table_b.data(), n_blocks,
                              lb.data(), &next_b, 0) == KVT_CUDA_OK;
  // An export issued after the un-awaited import must see the imported bytes.
  std::vector<uint8_t> reexport(stride * cached_blocks, 0);
  uint64_t ticket2 = 0;
  ok = ok && kvt_cuda_kv_export(ctx, table_b.data(), cached_blocks, reexport.data(), stride, &ticket2) == KVT_CUDA_OK;
  ok = ok && kvt_cuda_kv_export_wait(ctx, ticket2) == KVT_CUDA_OK;
  bool reexport_equal = ok;
  for (int i = 0; i < cached_blocks && ok; ++i)
    reexport_equal &= std::memcmp(reexport.data() + i * stride, (uint8_t*)pinned + i * stride, page_bytes) == 0;
  rep.expect_true(tag + " export after an un-awaited import sees the imported pages", reexport_equal);
  if (!ok) {
    rep.expect_true(tag, false, kvt_cuda_last_error(ctx));
  } else {
    std::vector<uint8_t> pa(page_bytes), pb(page_bytes);
    bool pages_equal = true;
    for (int i = 0; i < cached_blocks; ++i) {
      kvt_cuda_kv_page_read(ctx, table_a[i], pa.data());
      kvt_cuda_kv_page_read(ctx, table_b[i], pb.data());
      pages_equal &= pa == pb && std::memcmp(pa.data(), (uint8_t*)pinned + i * stride, page_bytes) == 0;
    }
    rep.expect_true(tag + " exported == imported == source pages", pages_equal);
    rep.expect_le(tag + " logits", rel_err(lb.data(), la.data(), la.size()), 0.0,
                  "bit-identical: no op's per-row result depends on T");
    std::vector<int32_t> ga, gb;
    int pos = P;
    for (int i = 0; i < n_decode && ok; ++i, ++pos) {
      ga.push_back(next_a);
      gb.push_back(next_b);
      int32_t ta = next_a, tb = next_b;
      ok = kvt_cuda_forward(model, &ta, 1, pos, table_a.data(), n_blocks, nullptr, &next_a, 0) == KVT_CUDA_OK &&
           kvt_cuda_forward(model, &tb, 1, pos, table_b.data(), n_blocks, nullptr, &next_b, 0) == KVT_CUDA_OK;
    }
    rep.expect_true(tag + " greedy continuation equal", ok && ga == gb);
  }
  kvt_cuda_host_free(ctx, pinned);
  kvt_cuda_model_destroy(model);
}

void check_errors(Report& rep, kvt_cuda_ctx* ctx) {
  int32_t id;
  rep.expect_true("gpu/error: K not a multiple of 32",
                  kvt_cuda_weight_random(ctx, KVT_F16, 4, 33, 1, 1.f, &id) == KVT_CUDA_ERR_INVALID,
                  kvt_cuda_last_error(ctx));
  rep.expect_true("gpu/error: unsupported dtype",
                  kvt_cuda_weight_random(ctx, 2 /* Q4_0 */, 4, 64, 1, 1.f, &id) == KVT_CUDA_ERR_UNSUPPORTED,
                  kvt_cuda_last_error(ctx));
  const int32_t bad_page = 1 << 20;
  uint64_t t;
  uint8_t dummy[16];
  rep.expect_true("gpu/error: export of a page outside the pool",
                  kvt_cuda_kv_export(ctx, &bad_page, 1, dummy, kvt_cuda_kv_page_bytes(ctx), &t) == KVT_CUDA_ERR_INVALID,
                  kvt_cuda_last_error(ctx));
}

// A real GGUF (small models: the CPU reference runs in double precision).
void check_gguf_model(Report& rep, int device, const std::string& path) {
  kvt_ref::HostLlama m;
  try {
    m = read_gguf_llama(path);
  } catch (const std::exception& e) {
    rep.expect_true("gpu/gguf read " + path, false, e.what());
    return;
  }
  kvt_cuda_ctx* ctx = nullptr;
  char err[256];
  if (kvt_cuda_create(device, &ctx, err, sizeof err) != KVT_CUDA_OK) {
    rep.expect_true("gpu/gguf context", false, err);
    return;
  }
  const int prompt = 100, n_decode = 8;
  if (kvt_cuda_kv_pool_create(ctx, m.cfg.n_layer, m.cfg.n_kv_head, m.cfg.head_dim,
                              (prompt + n_decode + 63) / 64 * 7 + 8) != KVT_CUDA_OK)
    rep.expect_true("gpu/gguf kv pool", false, kvt_cuda_last_error(ctx));
  else
    check_llama(rep, ctx, m, "gpu/gguf " + path, prompt, n_decode);
  kvt_cuda_destroy(ctx);
}

// The op-level C API (buffers + single ops) against the reference ops, with
// the context's own KV pool (3 layers, 2 kv heads, head_dim 64).
void check_op_api(Report& rep, kvt_cuda_ctx* ctx) {
  Rng rng(81);
  const int t = 70, d = 256, n_head = 4, n_kv = 2, hd = 64, vocab = 100, layer = 2;
  const HostWeight table = random_weight(KVT_F16, vocab, d, rng, 1.f);
  const HostWeight wq = random_weight(KVT_Q8_0, n_head * hd, d, rng, 0.1f);
  const HostWeight wk = random_weight(KVT_Q8_0, n_kv * hd, d, rng, 0.1f);
  std::vector<float> gain(d);
  fill_uniform(gain, rng, 1.f);
  std::vector<int32_t> toks(t), pages = {7, 3};
  for (auto& x : toks) x = (int32_t)(rng.next() % vocab);
  int32_t w_table, w_q, w_k, w_gain, b_x, b_h, b_qk, b_out;
  std::vector<int32_t> positions(t);
  std::iota(positions.begin(), positions.end(), 0);
  auto V = [](int32_t b, uint64_t off, uint64_t len) { return kvt_cuda_view{b, off, len}; };
  const uint64_t qn = (uint64_t)t * n_head * hd, kn = (uint64_t)t * n_kv * hd, xn = (uint64_t)t * d;
  const int32_t seg_len = 2, seg_pos0 = 0, seg_q = t;
  bool ok = kvt_cuda_weight_upload(ctx, table.type, vocab, d, table.raw.data(), &w_table) == KVT_CUDA_OK &&
            kvt_cuda_weight_upload(ctx, wq.type, wq.rows, d, wq.raw.data(), &w_q) == KVT_CUDA_OK &&
            kvt_cuda_weight_upload(ctx, wk.type, wk.rows, d, wk.raw.data(), &w_k) == KVT_CUDA_OK &&
            kvt_cuda_weight_upload(ctx, KVT_F32, 1, d, gain.data(), &w_gain) == KVT_CUDA_OK &&
            kvt_cuda_buffer_alloc(ctx, xn * 4, &b_x) == KVT_CUDA_OK &&
            kvt_cuda_buffer_alloc(ctx, xn * 4, &b_h) == KVT_CUDA_OK &&
            kvt_cuda_buffer_alloc(ctx, (qn + kn) * 4, &b_qk) == KVT_CUDA_OK &&  // q and k: views of one buffer
            kvt_cuda_buffer_alloc(ctx, qn * 4, &b_out) == KVT_CUDA_OK &&
            kvt_cuda_op_embed(ctx, V(b_x, 0, xn), w_table, toks.data(), t) == KVT_CUDA_OK &&
            kvt_cuda_op_rmsnorm(ctx, V(b_h, 0, xn), V(b_x, 0, xn), w_gain, t, 1e-5f) == KVT_CUDA_OK &&
            kvt_cuda_op_matmul(ctx, V(b_qk, 0, qn), V(b_h, 0, xn), w_q, t, 0) == KVT_CUDA_OK &&
            kvt_cuda_op_matmul(ctx, V(b_qk, qn, kn), V(b_h, 0, xn), w_k, t, 0) == KVT_CUDA_OK &&
            kvt_cuda_op_rope(ctx, V(b_qk, 0, qn), positions.data(), t, n_head, hd, hd, 10000.f, KVT_ROPE_NEOX) == KVT_CUDA_OK &&
            kvt_cuda_op_rope(ctx, V(b_qk, qn, kn), positions.data(), t, n_kv, hd, hd, 10000.f, KVT_ROPE_NEOX) == KVT_CUDA_OK &&
            kvt_cuda_op_kv_write(ctx, layer, pages.data(), 2, 0, t, V(b_qk, qn, kn), V(b_qk, qn, kn)) == KVT_CUDA_OK &&
            kvt_cuda_op_attention(ctx, V(b_out, 0, qn), V(b_qk, 0, qn), layer, n_head, 0.125f, 1, pages.data(), &seg_len,
                                  &seg_pos0, &seg_q) == KVT_CUDA_OK;
  if (!ok) {
    rep.expect_true("gpu/op api pipeline", false, kvt_cuda_last_error(ctx));
    return;
  }
  std::vector<float> out(qn);
  kvt_cuda_buffer_read(ctx, b_out, 0, out.data(), out.size() * 4);
  std::vector<float> x(xn), h(xn), q(qn), k(kn), ref(qn);
  kvt_ref::embed(x.data(), table, toks.data(), t);
  kvt_ref::rmsnorm(h.data(), x.data(), gain.data(), t, d, 1e-5f);
  kvt_ref::matmul(q.data(), h.data(), wq, t, false);
  kvt_ref::matmul(k.data(), h.data(), wk, t, false);
  kvt_ref::rope(q.data(), positions.data(), t, n_head, hd, hd, 10000.f, KVT_ROPE_NEOX);
  kvt_ref::rope(k.data(), positions.data(), t, n_kv, hd, hd, 10000.f, KVT_ROPE_NEOX);
  const size_t page_elems = kvt_cuda_kv_page_bytes(ctx) / 2;
  std::vector<uint16_t> host_pages(page_elems * 8, 0);
  kvt_ref::HostPagedKv kv{host_pages.data(), page_elems, pages.data(), 2, 3, n_kv, hd};
  kvt_ref::kv_write(kv, k.data(), k.data(), layer, t, 0);
  kvt_ref::attention(ref.data(), q.data(), kv, layer, t, n_head, 0, 0.125f);
  rep.expect_le("gpu/op api: embed→rmsnorm→q8 matmul→rope→kv_write→attention (views)",
                rel_err(out.data(), ref.data(), ref.size()), 5e-3, "chained ops; f16 K/V rounding may flip between sides");
  // Batched decode: a two-segment call equals the two single-segment calls.
  const int32_t tabs[] = {7, 3, 7}, lens[] = {2, 1}, p0s[] = {69, 10}, q1[] = {1, 1};
  const uint64_t row = (uint64_t)n_head * hd;
  ok = kvt_cuda_op_attention(ctx, V(b_out, 0, 2 * row), V(b_qk, 0, 2 * row), layer, n_head, 0.125f, 2, tabs, lens,
                             p0s, q1) == KVT_CUDA_OK;
  std::vector<float> two(2 * row), one(row);
  kvt_cuda_buffer_read(ctx, b_out, 0, two.data(), two.size() * 4);
  int mism = 0;
  for (int sgi = 0; sgi < 2 && ok; ++sgi) {
    ok = kvt_cuda_op_attention(ctx, V(b_out, 0, row), V(b_qk, sgi * row, row), layer, n_head, 0.125f, 1,
                               sgi == 0 ? tabs : tabs + 2, &lens[sgi], &p0s[sgi], &q1[sgi]) == KVT_CUDA_OK;
    kvt_cuda_buffer_read(ctx, b_out, 0, one.data(), one.size() * 4);
    mism += std::memcmp(one.data(), two.data() + sgi * row, row * 4) != 0;
  }
  rep.expect_true("gpu/op api: two-segment attention == per-segment calls", ok && mism == 0, kvt_cuda_last_error(ctx));
  const int32_t bad_tok = vocab + 5;
  rep.expect_true("gpu/op api: out-of-range token rejected",
                  kvt_cuda_op_embed(ctx, V(b_x, 0, xn), w_table, &bad_tok, 1) == KVT_CUDA_ERR_INVALID,
                  kvt_cuda_last_error(ctx));
  rep.expect_true("gpu/op api: undersized view rejected",
                  kvt_cuda_op_matmul(ctx, V(b_qk, qn, kn), V(b_h, 0, xn), w_q, t, 0) == KVT_CUDA_ERR_INVALID,
                  kvt_cuda_last_error(ctx));
  rep.expect_true("gpu/op api: view past its buffer rejected",
                  kvt_cuda_op_softmax(ctx, V(b_out, qn - 1, 2), 1, 2) == KVT_CUDA_ERR_INVALID, kvt_cuda_last_error(ctx));
  for (int32_t b : {b_x, b_h, b_qk, b_out}) kvt_cuda_buffer_free(ctx, b);
}

// A row's attention output must not depend on T, the tile it lands in, or
// whether the keys were split across blocks: bit-for-bit comparisons.
void check_attention_determinism(Report& rep, kvt_cuda_ctx* ctx) {
  for (int hd : {64, 128}) {
    const int n_head = 8, n_kv = 2, layers = 1, pos0 = 3000, T = 100, P = pos0 + T;
    const int n_blocks = (P + 63) / 64;
    const size_t page_elems = (size_t)layers * 2 * n_kv * 64 * hd;
    Rng rng(91 + hd);
    std::vector<int32_t> table(n_blocks);
    for (int i = 0; i < n_blocks; ++i) table[i] = (i * 17) % n_blocks;  // a permutation (17 ∤ n_blocks)
    std::vector<float> k((size_t)P * n_kv * hd), v(k.size()), q((size_t)T * n_head * hd);
    fill_uniform(k, rng, 1.f);
    fill_uniform(v, rng, 1.f);
    fill_uniform(q, rng, 3.f);
    DevBuf<uint16_t> dpages(page_elems * n_blocks);
    DevBuf<int32_t> dtable(table);
    DevBuf<float> dk(k), dv(v), dq(q), dsplit(q.size()), dfold(q.size()), done((size_t)n_head * hd);
    kvt_cuda::PagedKv kv{reinterpret_cast<__half*>(dpages.p), page_elems, dtable.p, n_blocks, layers, n_kv, hd};
    const std::string name = "gpu/attention hd" + std::to_string(hd) + " row results independent of T and split";
    if (!launched(rep, name, kvt_cuda::launch_kv_write(kv, dk.p, dv.p, 0, P, 0, 0))) continue;
    const float scale = 1.f / std::sqrt((float)hd);
    const size_t ws_bytes = kvt_cuda::attention_workspace_bytes(T, n_head, n_kv, hd, pos0, ctx->sm_count);
    DevBuf<uint8_t> ws(std::max<size_t>(ws_bytes, 1 << 20));
    const size_t ws1 = kvt_cuda::attention_workspace_bytes(1, n_head, n_kv, hd, pos0, ctx->sm_count);
    if (!launched(rep, name, kvt_cuda::launch_attention(dsplit.p, dq.p, kv, 0, T, n_head, pos0, scale, ws.p,
                                                       ws.n, ctx->sm_count, 0)) ||
        !launched(rep, name, kvt_cuda::launch_attention(dfold.p, dq.p, kv, 0, T, n_head, pos0, scale, nullptr, 0,
                                                       ctx->sm_count, 0)))
      continue;
    const std::vector<float> a = dsplit.down(), b = dfold.down();
    int mismatches = std::memcmp(a.data(), b.data(), a.size() * 4) != 0;
    for (int r : {0, 37, 99}) {
      if (!launched(rep, name, kvt_cuda::launch_attention(done.p, dq.p + (size_t)r * n_head * hd, kv, 0, 1, n_head,
                                                         pos0 + r, scale, ws.p, ws.n, ctx->sm_count, 0)))
        break;
      const std::vector<float> one = done.down();
      mismatches += std::memcmp(one.data(), a.data() + (size_t)r * n_head * hd, one.size() * 4) != 0;
    }
    rep.expect_le(name, mismatches, 0,
                  std::string(ws_bytes ? "split" : "fold") + " T=100 vs fold T=100 vs T=1 rows (" +
                      (ws1 ? "split" : "fold") + ")");
  }
}

}  // namespace

void run_gpu_checks(Report& rep, kvt_cuda_ctx* ctx, const std::string& gguf_path) {
  check_matmul(rep, ctx);
  check_small_ops(rep);
  check_embed(rep, ctx);
  check_attention(rep, ctx);
  check_attention_determinism(rep, ctx);

  kvt_llama_config c{};
  c.n_vocab = 512; c.d_model = 256; c.n_layer = 3; c.n_head = 4; c.n_kv_head = 2; c.head_dim = 64;
  c.d_ffn = 512; c.rms_eps = 1e-5f; c.rope_base = 10000.f; c.rope_mode = KVT_ROPE_NORMAL;
  if (kvt_cuda_kv_pool_create(ctx, c.n_layer, c.n_kv_head, c.head_dim, 16) != KVT_CUDA_OK) {
    rep.expect_true("gpu/kv pool", false, kvt_cuda_last_error(ctx));
    return;
  }
  check_errors(rep, ctx);
  check_op_api(rep, ctx);
  const kvt_ref::HostLlama f16 = random_llama(c, KVT_F16, 101);
  check_llama(rep, ctx, f16, "gpu/llama f16 rope-normal", 150, 12);
  check_llama(rep, ctx, random_llama(c, KVT_Q8_0, 102), "gpu/llama q8_0", 150, 12);
  check_llama(rep, ctx, random_llama(c, KVT_BF16, 103), "gpu/llama bf16", 150, 12);
  kvt_llama_config neox = c;
  neox.rope_mode = KVT_ROPE_NEOX;
  check_llama(rep, ctx, random_llama(neox, KVT_F16, 104), "gpu/llama f16 rope-neox", 100, 12);
  check_cache_equivalence(rep, ctx, f16, 40);
  check_cache_equivalence(rep, ctx, f16, 8);
  if (!gguf_path.empty()) check_gguf_model(rep, ctx->device, gguf_path);
}

}  // namespace kvt_driver
