// N-API bindings of the paged-KV ops (kv writes and attention, GQA and MLA)
// and their *Ref twins, registered by addon.cc's Init. Every block table entry
// is checked against the pool, so a bad table throws, never reads astray.
#include "napi-args.h"

#include <string>
#include <vector>

#include "dispatch.h"
#include "kernels.h"
#include "kv-args.h"
#include "ops/mla-attention.h"
#include "thread-pool.h"

namespace kvt {

// KV args at [i..i+4]: pages, layers, kvHeads, headDim, kvDtype. Checks the pool size.
bool get_kv(const Napi::CallbackInfo& info, size_t i, Bytes* pages, KvLayout* kv, size_t* n_pages) {
  Napi::Env env = info.Env();
  if (!get_bytes(info, i, pages, "pages") || !get_int(info, i + 1, &kv->layers, "layers", 1) ||
      !get_int(info, i + 2, &kv->kv_heads, "kvHeads", 1) || !get_int(info, i + 3, &kv->head_dim, "headDim", 1, 256) ||
      !get_int(info, i + 4, &kv->dtype, "kvDtype"))
    return false;
  if (!need(env, kv->dtype == F32 || kv->dtype == F16, "kv dtype must be 0 (F32) or 1 (F16)")) return false;
  size_t pb = kv->page_bytes();
  *n_pages = pb ? pages->n / pb : 0;
  return need(env, *n_pages > 0, "kv pool smaller than one page");
}

namespace {

bool check_table(Napi::Env env, const int32_t* table, size_t n_table, size_t n_pages, int tokens) {
  size_t blocks = ((size_t)tokens + kPageTokens - 1) / kPageTokens;
  if (!need(env, n_table >= blocks,
            "block table has " + std::to_string(n_table) + " pages, positions need " + std::to_string(blocks)))
    return false;
  for (size_t b = 0; b < blocks; ++b)
    if (!need(env, table[b] >= 0 && (size_t)table[b] < n_pages,
              "block table entry " + std::to_string(table[b]) + " out of range [0, " + std::to_string(n_pages) + ")"))
      return false;
  return true;
}

}  // namespace

// Attention segments: segs holds [tableOffset, tableLen, pos0, nQueries] per
// segment, into tables; checks each range and block table against the pool
// and gives rows = Σ nQueries (the segments' query rows are consecutive).
bool get_segments(Napi::Env env, const std::string& op, int32_t* tables, size_t n_tables, const int32_t* segs,
                  size_t n_segs4, size_t n_pages, std::vector<AttnSegment>* sg, int* rows) {
  if (!need(env, n_segs4 % 4 == 0, op + ": segments must hold 4 ints per segment")) return false;
  sg->resize(n_segs4 / 4);
  *rows = 0;
  for (size_t s = 0; s < sg->size(); ++s) {
    int off = segs[s * 4], len = segs[s * 4 + 1], pos0 = segs[s * 4 + 2], nq = segs[s * 4 + 3];
    if (!need(env, off >= 0 && len >= 0 && (size_t)off + len <= n_tables && pos0 >= 0 && nq >= 0,
              op + ": segment " + std::to_string(s) + " has a bad table range, pos0 or query count") ||
        !check_table(env, tables + off, (size_t)len, n_pages, pos0 + nq))
      return false;
    (*sg)[s] = AttnSegment{tables + off, len, pos0, nq, *rows};
    *rows += nq;
  }
  return true;
}

namespace {

// kvWrite(pages, layers, kvHeads, headDim, kvDtype, layer, blockTable, pos0, n, k, v)
template <bool kRef>
Napi::Value KvWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Bytes pages;
  KvLayout kv;
  size_t n_pages, n_table, n_k, n_v;
  int layer, pos0, n;
  int32_t* table;
  float *k, *v;
  if (!get_kv(info, 0, &pages, &kv, &n_pages) || !get_int(info, 5, &layer, "layer") || !get_i32(info, 6, &table, &n_table, "blockTable") ||
      !get_int(info, 7, &pos0, "pos0") || !get_int(info, 8, &n, "n") || !get_f32(info, 9, &k, &n_k, "k") ||
      !get_f32(info, 10, &v, &n_v, "v"))
    return env.Undefined();
  size_t row = (size_t)kv.kv_heads * kv.head_dim;
  if (!need(env, layer < kv.layers, "kvWrite: layer out of range") ||
      !need(env, n_k >= row * n && n_v >= row * n, "kvWrite: k and v need n*kvHeads*headDim floats") ||
      !check_table(env, table, n_table, n_pages, pos0 + n))
    return env.Undefined();
  if (kRef) kv_write_ref(pages.p, kv, layer, table, (int)n_table, pos0, n, k, v);
  else kv_write(pages.p, kv, layer, table, (int)n_table, pos0, n, k, v, global_pool());
  return env.Undefined();
}

// attention(out, q, pages, layers, kvHeads, headDim, kvDtype, layer, heads, scale, tables, segs)
//   tables: Int32Array of all block tables back to back
//   segs:   Int32Array [tableOffset, tableLength, pos0, queries] per segment
template <bool kRef>
Napi::Value Attention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *q;
  size_t n_out, n_q, n_pages, n_tables, n_segs4;
  Bytes pages;
  KvLayout kv;
  int layer, heads;
  float scale;
  int32_t *tables, *segs;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &q, &n_q, "q") || !get_kv(info, 2, &pages, &kv, &n_pages) ||
      !get_int(info, 7, &layer, "layer") || !get_int(info, 8, &heads, "heads", 1) || !get_float(info, 9, &scale, "scale") ||
      !get_i32(info, 10, &tables, &n_tables, "tables") || !get_i32(info, 11, &segs, &n_segs4, "segments"))
    return env.Undefined();
  if (!need(env, layer < kv.layers, "attention: layer out of range") ||
      !need(env, heads % kv.kv_heads == 0, "attention: heads must be a multiple of kvHeads"))
    return env.Undefined();
  std::vector<AttnSegment> sg;
  int rows = 0;
  if (!get_segments(env, "attention", tables, n_tables, segs, n_segs4, n_pages, &sg, &rows)) return env.Undefined();
  size_t need_f = (size_t)rows * heads * kv.head_dim;
  if (!need(env, n_out >= need_f && n_q >= need_f, "attention: q and out need Σqueries*heads*headDim floats"))
    return env.Undefined();
  if (kRef) attention_ref(out, q, pages.p, kv, layer, heads, scale, sg.data(), (int)sg.size());
  else active_kernels().attention(out, q, pages.p, kv, layer, heads, scale, sg.data(), (int)sg.size(), global_pool());
  return env.Undefined();
}

// MLA latent pages at [i..i+3]: pages, layers, width, kvDtype. Checks the pool size.
bool get_mla(const Napi::CallbackInfo& info, size_t i, Bytes* pages, MlaLayout* kv, size_t* n_pages) {
  Napi::Env env = info.Env();
  if (!get_bytes(info, i, pages, "pages") || !get_int(info, i + 1, &kv->layers, "layers", 1) ||
      !get_int(info, i + 2, &kv->width, "width", 1, 4096) || !get_int(info, i + 3, &kv->dtype, "kvDtype"))
    return false;
  if (!need(env, kv->dtype == F32 || kv->dtype == F16, "kv dtype must be 0 (F32) or 1 (F16)")) return false;
  size_t pb = kv->page_bytes();
  *n_pages = pb ? pages->n / pb : 0;
  return need(env, *n_pages > 0, "mla kv pool smaller than one page");
}

// mlaKvWrite(pages, layers, width, kvDtype, layer, blockTable, pos0, n, latent)
template <bool kRef>
Napi::Value MlaKvWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Bytes pages;
  MlaLayout kv;
  size_t n_pages, n_table, n_lat;
  int layer, pos0, n;
  int32_t* table;
  float* lat;
  if (!get_mla(info, 0, &pages, &kv, &n_pages) || !get_int(info, 4, &layer, "layer") ||
      !get_i32(info, 5, &table, &n_table, "blockTable") || !get_int(info, 6, &pos0, "pos0") || !get_int(info, 7, &n, "n") ||
      !get_f32(info, 8, &lat, &n_lat, "latent"))
    return env.Undefined();
  if (!need(env, layer < kv.layers, "mlaKvWrite: layer out of range") ||
      !need(env, n_lat >= (size_t)kv.width * n, "mlaKvWrite: latent needs n*width floats") ||
      !check_table(env, table, n_table, n_pages, pos0 + n))
    return env.Undefined();
  if (kRef) mla_kv_write_ref(pages.p, kv, layer, table, pos0, n, lat);
  else mla_kv_write(pages.p, kv, layer, table, pos0, n, lat, global_pool());
  return env.Undefined();
}

// mlaAttention(out, q, pages, layers, width, kvDtype, layer, heads, vDim, scale, tables, segs)
template <bool kRef>
Napi::Value MlaAttention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *q;
  size_t n_out, n_q, n_pages, n_tables, n_segs4;
  Bytes pages;
  MlaLayout kv;
  int layer, heads, v_dim;
  float scale;
  int32_t *tables, *segs;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &q, &n_q, "q") || !get_mla(info, 2, &pages, &kv, &n_pages) ||
      !get_int(info, 6, &layer, "layer") || !get_int(info, 7, &heads, "heads", 1) || !get_int(info, 8, &v_dim, "vDim", 1) ||
      !get_float(info, 9, &scale, "scale") || !get_i32(info, 10, &tables, &n_tables, "tables") ||
      !get_i32(info, 11, &segs, &n_segs4, "segments"))
    return env.Undefined();
  if (!need(env, layer < kv.layers, "mlaAttention: layer out of range") ||
      !need(env, v_dim <= kv.width, "mlaAttention: vDim must be <= width"))
    return env.Undefined();
  std::vector<AttnSegment> sg;
  int rows = 0;
  if (!get_segments(env, "mlaAttention", tables, n_tables, segs, n_segs4, n_pages, &sg, &rows)) return env.Undefined();
  if (!need(env, n_q >= (size_t)rows * heads * kv.width, "mlaAttention: q needs Σqueries*heads*width floats") ||
      !need(env, n_out >= (size_t)rows * heads * v_dim, "mlaAttention: out needs Σqueries*heads*vDim floats"))
    return env.Undefined();
  if (kRef) mla_attention_ref(out, q, pages.p, kv, layer, heads, v_dim, scale, sg.data(), (int)sg.size());
  else mla_attention(out, q, pages.p, kv, layer, heads, v_dim, scale, sg.data(), (int)sg.size(), global_pool());
  return env.Undefined();
}

}  // namespace

void register_attention(Napi::Env env, Napi::Object exports) {
  exports.Set("kvWrite", Napi::Function::New(env, KvWrite<false>));
  exports.Set("kvWriteRef", Napi::Function::New(env, KvWrite<true>));
  exports.Set("attention", Napi::Function::New(env, Attention<false>));
  exports.Set("attentionRef", Napi::Function::New(env, Attention<true>));
  exports.Set("mlaKvWrite", Napi::Function::New(env, MlaKvWrite<false>));
  exports.Set("mlaKvWriteRef", Napi::Function::New(env, MlaKvWrite<true>));
  exports.Set("mlaAttention", Napi::Function::New(env, MlaAttention<false>));
  exports.Set("mlaAttentionRef", Napi::Function::New(env, MlaAttention<true>));
}

}  // namespace kvt
