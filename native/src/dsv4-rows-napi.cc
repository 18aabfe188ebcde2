// N-API bindings of the deepseek4 row ops (ops/dsv4-rmsnorm.h, dsv4-hc-weights.h,
// dsv4-swiglu.h, dsv4-moe-combine.h), registered by addon.cc's Init. Every
// length is checked here (KVT_ERR_NATIVE_SHAPE / KVT_ERR_NATIVE_ARG), never a
// stray read or write. Each has a *Ref twin (one thread, plain loops).
//   dsv4RmsNormRows(out, x, w, T, n, eps)            w of length 0: no weight
//   dsv4HcWeights(pre, post, comb, mixes, scale, base, T, hc, eps, iters, withComb)
//   dsv4SwigluClamp(out, g, u, n, limit)
//   dsv4MoeCombine(out, y, w, sy, T, K, d)
#include <napi.h>

#include "napi-args.h"
#include "ops/dsv4-hc-weights.h"
#include "ops/dsv4-moe-combine.h"
#include "ops/dsv4-rmsnorm.h"
#include "ops/dsv4-swiglu.h"

namespace kvt {
namespace {

bool get_double(const Napi::CallbackInfo& info, size_t i, double* out, const char* what) {
  if (info.Length() <= i || !info[i].IsNumber()) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + " must be a number");
    return false;
  }
  *out = info[i].As<Napi::Number>().DoubleValue();
  return true;
}

template <bool kRef>
Napi::Value RmsNormRows(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *x, *w;
  size_t n_out, n_x, n_w;
  int T, n;
  double eps;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &x, &n_x, "x") || !get_f32(info, 2, &w, &n_w, "w") ||
      !get_int(info, 3, &T, "T") || !get_int(info, 4, &n, "n", 1) || !get_double(info, 5, &eps, "eps"))
    return env.Undefined();
  const size_t rows = (size_t)T * n;
  if (!need(env, n_out >= rows && n_x >= rows && (n_w == 0 || n_w >= (size_t)n), "dsv4RmsNormRows: out and x need T*n floats, w 0 or n"))
    return env.Undefined();
  const float* wp = n_w == 0 ? nullptr : w;
  if (kRef) dsv4_rmsnorm_rows_ref(out, x, wp, T, n, eps);
  else dsv4_rmsnorm_rows(out, x, wp, T, n, eps, global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value HcWeights(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *pre, *post, *comb, *mixes, *scale, *base;
  size_t n_pre, n_post, n_comb, n_mixes, n_scale, n_base;
  int T, hc, iters;
  double eps;
  if (!get_f32(info, 0, &pre, &n_pre, "pre") || !get_f32(info, 1, &post, &n_post, "post") || !get_f32(info, 2, &comb, &n_comb, "comb") ||
      !get_f32(info, 3, &mixes, &n_mixes, "mixes") || !get_f32(info, 4, &scale, &n_scale, "scale") || !get_f32(info, 5, &base, &n_base, "base") ||
      !get_int(info, 6, &T, "T") || !get_int(info, 7, &hc, "hc", 1, 64) || !get_double(info, 8, &eps, "eps") ||
      !get_int(info, 9, &iters, "iters", 0, 1 << 16))
    return env.Undefined();
  if (!need(env, info.Length() > 10 && info[10].IsBoolean(), "dsv4HcWeights: withComb must be a boolean")) return env.Undefined();
  const bool with_comb = info[10].As<Napi::Boolean>().Value();
  const size_t n_mix = with_comb ? (size_t)(2 + hc) * hc : (size_t)hc;
  const size_t tc = with_comb ? (size_t)T : 0;
  if (!need(env, n_pre >= (size_t)T * hc && n_post >= tc * hc && n_comb >= tc * hc * hc, "dsv4HcWeights: pre needs T*hc floats, post T*hc and comb T*hc*hc with comb") ||
      !need(env, n_mixes >= (size_t)T * n_mix && n_scale >= (with_comb ? 3u : 1u) && n_base >= n_mix, "dsv4HcWeights: mixes need T*nMix floats, scale 3 (1 without comb), base nMix"))
    return env.Undefined();
  if (kRef) dsv4_hc_weights_ref(pre, post, comb, mixes, scale, base, T, hc, eps, iters, with_comb);
  else dsv4_hc_weights(pre, post, comb, mixes, scale, base, T, hc, eps, iters, with_comb, global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value SwigluClamp(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *g, *u;
  size_t n_out, n_g, n_u;
  int n;
  double limit;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &g, &n_g, "g") || !get_f32(info, 2, &u, &n_u, "u") ||
      !get_int(info, 3, &n, "n") || !get_double(info, 4, &limit, "limit"))
    return env.Undefined();
  if (!need(env, n_out >= (size_t)n && n_g >= (size_t)n && n_u >= (size_t)n, "dsv4SwigluClamp: out, g and u need n floats")) return env.Undefined();
  if (kRef) dsv4_swiglu_clamp_ref(out, g, u, (size_t)n, limit);
  else dsv4_swiglu_clamp(out, g, u, (size_t)n, limit, global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value MoeCombine(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *y, *w, *sy;
  size_t n_out, n_y, n_w, n_sy;
  int T, K, d;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &y, &n_y, "y") || !get_f32(info, 2, &w, &n_w, "w") ||
      !get_f32(info, 3, &sy, &n_sy, "sy") || !get_int(info, 4, &T, "T") || !get_int(info, 5, &K, "K") || !get_int(info, 6, &d, "d", 1))
    return env.Undefined();
  const size_t rows = (size_t)T * d;
  if (!need(env, n_out >= rows && n_sy >= rows && n_y >= rows * K && n_w >= (size_t)T * K, "dsv4MoeCombine: out and sy need T*d floats, y T*K*d, w T*K"))
    return env.Undefined();
  if (kRef) dsv4_moe_combine_ref(out, y, w, sy, T, K, d);
  else dsv4_moe_combine(out, y, w, sy, T, K, d, global_pool());
  return env.Undefined();
}

}  // namespace

void register_dsv4_rows(Napi::Env env, Napi::Object exports) {
  exports.Set("dsv4RmsNormRows", Napi::Function::New(env, RmsNormRows<false>));
  exports.Set("dsv4RmsNormRowsRef", Napi::Function::New(env, RmsNormRows<true>));
  exports.Set("dsv4HcWeights", Napi::Function::New(env, HcWeights<false>));
  exports.Set("dsv4HcWeightsRef", Napi::Function::New(env, HcWeights<true>));
  exports.Set("dsv4SwigluClamp", Napi::Function::New(env, SwigluClamp<false>));
  exports.Set("dsv4SwigluClampRef", Napi::Function::New(env, SwigluClamp<true>));
  exports.Set("dsv4MoeCombine", Napi::Function::New(env, MoeCombine<false>));
  exports.Set("dsv4MoeCombineRef", Napi::Function::New(env, MoeCombine<true>));
}

}  // namespace kvt
