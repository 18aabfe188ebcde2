// N-API bindings of ops/dsv4-sparse-attention.h, registered by addon.cc's Init.
// Every length and key index is checked here (a bad one throws
// KVT_ERR_NATIVE_SHAPE / KVT_ERR_NATIVE_ARG), never a stray read or write.
//   dsv4SparseAttention / dsv4SparseAttentionRef(out, q, keys, idx, off, sinks, T, H, D, scale)
//   actRoundTrip(out, x, kind)   kind 0: q8_0, 1: q8_K (ops/act-roundtrip.h)
//   dsv4HcCollapse(X, H, pre, T, hc, d) / dsv4HcExpand(out, Y, H, post, comb, T, hc, d) (ops/dsv4-hc.h)
//   dsv4IndexerTopK / dsv4IndexerTopKRef(sel, q, w, keys, n, T, H, D, k, scale) (ops/dsv4-indexer.h)
#include <napi.h>

#include "napi-args.h"
#include "ops/act-roundtrip.h"
#include "ops/dsv4-hc.h"
#include "ops/dsv4-indexer.h"
#include "ops/dsv4-sparse-attention.h"

namespace kvt {
namespace {

template <bool kRef>
Napi::Value SparseAttention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *q, *keys, *sinks;
  int32_t *idx, *off;
  size_t n_out, n_q, n_keys, n_idx, n_off, n_sinks;
  int T, H, D;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &q, &n_q, "q") || !get_f32(info, 2, &keys, &n_keys, "keys") ||
      !get_i32(info, 3, &idx, &n_idx, "idx") || !get_i32(info, 4, &off, &n_off, "off") || !get_f32(info, 5, &sinks, &n_sinks, "sinks") ||
      !get_int(info, 6, &T, "T") || !get_int(info, 7, &H, "H", 1) || !get_int(info, 8, &D, "D", 1))
    return env.Undefined();
  if (!need(env, info.Length() > 9 && info[9].IsNumber(), "dsv4SparseAttention: scale must be a number")) return env.Undefined();
  const double sc = info[9].As<Napi::Number>().DoubleValue();
  const size_t rows = (size_t)T * H * D;
  if (!need(env, n_out >= rows && n_q >= rows, "dsv4SparseAttention: q and out need T*H*D floats") ||
      !need(env, n_sinks >= (size_t)H, "dsv4SparseAttention: sinks need H floats") ||
      !need(env, n_off >= (size_t)T + 1 && off[0] == 0, "dsv4SparseAttention: off needs T+1 offsets starting at 0"))
    return env.Undefined();
  const size_t pool_keys = n_keys / (size_t)D;
  for (int t = 0; t < T; ++t)
    if (!need(env, off[t] <= off[t + 1] && (size_t)off[t + 1] <= n_idx, "dsv4SparseAttention: offsets must ascend within idx")) return env.Undefined();
  for (int32_t j = 0; j < off[T]; ++j)
    if (!need(env, idx[j] >= 0 && (size_t)idx[j] < pool_keys, "dsv4SparseAttention: key index outside keys")) return env.Undefined();
  if (kRef) dsv4_sparse_attention_ref(out, q, keys, idx, off, sinks, T, H, D, sc);
  else dsv4_sparse_attention(out, q, keys, idx, off, sinks, T, H, D, sc, global_pool());
  return env.Undefined();
}

Napi::Value ActRoundTrip(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *x;
  size_t n_out, n_x;
  int kind;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &x, &n_x, "x") || !get_int(info, 2, &kind, "kind", 0, 1)) return env.Undefined();
  const size_t block = kind == 0 ? 32 : 256;
  if (!need(env, n_out >= n_x && n_x % block == 0, "actRoundTrip: x must be whole blocks (32 for q8_0, 256 for q8_K) and out at least as long"))
    return env.Undefined();
  if (kind == 0) act_roundtrip_q8_0(out, x, n_x, global_pool());
  else act_roundtrip_q8_k(out, x, n_x, global_pool());
  return env.Undefined();
}

Napi::Value HcCollapse(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *X, *H, *pre;
  size_t nX, nH, nPre;
  int T, hc, d;
  if (!get_f32(info, 0, &X, &nX, "X") || !get_f32(info, 1, &H, &nH, "H") || !get_f32(info, 2, &pre, &nPre, "pre") || !get_int(info, 3, &T, "T") ||
      !get_int(info, 4, &hc, "hc", 1) || !get_int(info, 5, &d, "d", 1))
    return env.Undefined();
  const size_t rows = (size_t)T * d;
  if (!need(env, nX >= rows && nH >= rows * hc && nPre >= (size_t)T * hc, "dsv4HcCollapse: X needs T*d, H T*hc*d, pre T*hc floats")) return env.Undefined();
  dsv4_hc_collapse(X, H, pre, T, hc, d, global_pool());
  return env.Undefined();
}

Napi::Value HcExpand(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *Y, *H, *post, *comb;
  size_t nOut, nY, nH, nPost, nComb;
  int T, hc, d;
  if (!get_f32(info, 0, &out, &nOut, "out") || !get_f32(info, 1, &Y, &nY, "Y") || !get_f32(info, 2, &H, &nH, "H") ||
      !get_f32(info, 3, &post, &nPost, "post") || !get_f32(info, 4, &comb, &nComb, "comb") || !get_int(info, 5, &T, "T") ||
      !get_int(info, 6, &hc, "hc", 1) || !get_int(info, 7, &d, "d", 1))
    return env.Undefined();
  const size_t rows = (size_t)T * d;
  if (!need(env, nOut >= rows * hc && nY >= rows && nH >= rows * hc && nPost >= (size_t)T * hc && nComb >= (size_t)T * hc * hc,
            "dsv4HcExpand: out and H need T*hc*d, Y T*d, post T*hc, comb T*hc*hc floats"))
    return env.Undefined();
  dsv4_hc_expand(out, Y, H, post, comb, T, hc, d, global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value IndexerTopK(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int32_t *sel, *n;
  float *q, *w, *keys;
  size_t n_sel, n_q, n_w, n_keys, n_n;
  int T, H, D, k;
  if (!get_i32(info, 0, &sel, &n_sel, "sel") || !get_f32(info, 1, &q, &n_q, "q") || !get_f32(info, 2, &w, &n_w, "w") ||
      !get_f32(info, 3, &keys, &n_keys, "keys") || !get_i32(info, 4, &n, &n_n, "n") || !get_int(info, 5, &T, "T") ||
      !get_int(info, 6, &H, "H", 1) || !get_int(info, 7, &D, "D", 1) || !get_int(info, 8, &k, "k", 1))
    return env.Undefined();
  if (!need(env, info.Length() > 9 && info[9].IsNumber(), "dsv4IndexerTopK: scale must be a number")) return env.Undefined();
  const double sc = info[9].As<Napi::Number>().DoubleValue();
  if (!need(env, n_sel >= (size_t)T * k && n_n >= (size_t)T, "dsv4IndexerTopK: sel needs T*k ints, n T ints") ||
      !need(env, n_q >= (size_t)T * H * D && n_w >= (size_t)T * H, "dsv4IndexerTopK: q needs T*H*D floats, w T*H floats"))
    return env.Undefined();
  const size_t pool_keys = n_keys / (size_t)D;
  for (int t = 0; t < T; ++t)
    if (!need(env, n[t] >= 0 && (size_t)n[t] <= pool_keys, "dsv4IndexerTopK: a token's key count exceeds keys")) return env.Undefined();
  if (kRef) dsv4_indexer_topk_ref(sel, q, w, keys, n, T, H, D, k, sc);
  else dsv4_indexer_topk(sel, q, w, keys, n, T, H, D, k, sc, global_pool());
  return env.Undefined();
}

}  // namespace

void register_dsv4_ops(Napi::Env env, Napi::Object exports) {
  exports.Set("dsv4SparseAttention", Napi::Function::New(env, SparseAttention<false>));
  exports.Set("dsv4SparseAttentionRef", Napi::Function::New(env, SparseAttention<true>));
  exports.Set("actRoundTrip", Napi::Function::New(env, ActRoundTrip));
  exports.Set("dsv4HcCollapse", Napi::Function::New(env, HcCollapse));
  exports.Set("dsv4HcExpand", Napi::Function::New(env, HcExpand));
  exports.Set("dsv4IndexerTopK", Napi::Function::New(env, IndexerTopK<false>));
  exports.Set("dsv4IndexerTopKRef", Napi::Function::New(env, IndexerTopK<true>));
}

}  // namespace kvt
