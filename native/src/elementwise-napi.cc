// N-API bindings of the row-wise ops (norm, softmax, swiglu, add, rope, embed)
// and their *Ref twins, registered by addon.cc's Init. Every length is checked
// against the shape, so a wrong shape from TypeScript throws, never writes astray.
#include "napi-args.h"

#include <cmath>

#include "dispatch.h"
#include "kernels.h"
#include "quant/blocks.h"
#include "thread-pool.h"

namespace kvt {
namespace {

template <bool kRef>
Napi::Value RmsNorm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *x, *g;
  size_t n_out, n_x, n_g;
  int rows, dim;
  float eps;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &x, &n_x, "x") || !get_f32(info, 2, &g, &n_g, "gain") ||
      !get_int(info, 3, &rows, "rows") || !get_int(info, 4, &dim, "dim", 1) || !get_float(info, 5, &eps, "eps"))
    return env.Undefined();
  size_t n = (size_t)rows * dim;
  if (!need(env, n_out >= n && n_x >= n && n_g >= (size_t)dim, "rmsNorm: out/x need rows*dim floats, gain dim floats"))
    return env.Undefined();
  if (kRef) rmsnorm_ref(out, x, g, rows, dim, eps);
  else active_kernels().rmsnorm(out, x, g, rows, dim, eps, global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value Softmax(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float* x;
  size_t n_x;
  int rows, cols;
  if (!get_f32(info, 0, &x, &n_x, "x") || !get_int(info, 1, &rows, "rows") || !get_int(info, 2, &cols, "cols", 1))
    return env.Undefined();
  if (!need(env, n_x >= (size_t)rows * cols, "softmax: x needs rows*cols floats")) return env.Undefined();
  if (kRef) softmax_ref(x, rows, cols);
  else active_kernels().softmax(x, rows, cols, global_pool());
  return env.Undefined();
}

template <bool kRef, bool kSwiglu>
Napi::Value Binary(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *a, *b;
  size_t n_out, n_a, n_b;
  int n;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &a, &n_a, "a") || !get_f32(info, 2, &b, &n_b, "b") ||
      !get_int(info, 3, &n, "n"))
    return env.Undefined();
  if (!need(env, n_out >= (size_t)n && n_a >= (size_t)n && n_b >= (size_t)n, "out, a and b need n floats each"))
    return env.Undefined();
  if (kSwiglu) {
    if (kRef) swiglu_ref(out, a, b, n);
    else active_kernels().swiglu(out, a, b, n, global_pool());
  } else {
    if (kRef) add_ref(out, a, b, n);
    else active_kernels().add(out, a, b, n, global_pool());
  }
  return env.Undefined();
}

// rope(x, positions, rows, heads, headDim, rotDims, mode, freqBase[, scaling[, freqFactors]])
//   scaling:     Float32Array [freqScale, extFactor, attnFactor, betaFast, betaSlow, nCtxOrig] (see RopeParams)
//   freqFactors: Float32Array [rotDims/2] of theta divisors (rope_freqs.weight)
// An absent, undefined or null scaling / freqFactors means plain RoPE.
template <bool kRef>
Napi::Value Rope(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float* x;
  int32_t* pos;
  size_t n_x, n_pos;
  int rows, heads, hd, rot, mode;
  float base;
  if (!get_f32(info, 0, &x, &n_x, "x") || !get_i32(info, 1, &pos, &n_pos, "positions") ||
      !get_int(info, 2, &rows, "rows") || !get_int(info, 3, &heads, "heads", 1) || !get_int(info, 4, &hd, "headDim", 1) ||
      !get_int(info, 5, &rot, "rotDims", 0) || !get_int(info, 6, &mode, "mode", 0, 2) || !get_float(info, 7, &base, "freqBase"))
    return env.Undefined();
  if (!need(env, n_x >= (size_t)rows * heads * hd, "rope: x needs rows*heads*headDim floats") ||
      !need(env, n_pos >= (size_t)rows, "rope: positions needs rows entries") ||
      !need(env, rot % 2 == 0 && rot <= hd, "rope: rotDims must be even and <= headDim") ||
      !need(env, mode == 0 || mode == 2, "rope: mode must be 0 (normal) or 2 (neox)") ||
      !need(env, base > 0, "rope: freqBase must be > 0"))
    return env.Undefined();
  RopeParams p;
  p.rot_dims = rot;
  p.mode = mode;
  p.freq_base = base;
  auto present = [&](size_t i) { return info.Length() > i && !info[i].IsUndefined() && !info[i].IsNull(); };
  if (present(8)) {
    float* sc;
    size_t n_sc;
    if (!get_f32(info, 8, &sc, &n_sc, "scaling")) return env.Undefined();
    if (!need(env, n_sc == 6, "rope: scaling holds [freqScale, extFactor, attnFactor, betaFast, betaSlow, nCtxOrig]"))
      return env.Undefined();
    p.freq_scale = sc[0];
    p.ext_factor = sc[1];
    p.attn_factor = sc[2];
    p.beta_fast = sc[3];
    p.beta_slow = sc[4];
    p.n_ctx_orig = (int)sc[5];
    bool finite = true;
    for (int i = 0; i < 6; ++i) finite = finite && std::isfinite(sc[i]);
    if (!need(env, finite, "rope: scaling values must be finite") ||
        !need(env, p.freq_scale > 0, "rope: freqScale must be > 0 (it is 1/factor)") ||
        !need(env, p.ext_factor == 0 || (p.n_ctx_orig > 0 && p.beta_fast > 0 && p.beta_slow > 0 && (float)p.n_ctx_orig == sc[5]),
              "rope: YaRN (extFactor != 0) needs an integer nCtxOrig > 0 and betaFast, betaSlow > 0"))
      return env.Undefined();
  }
  if (present(9)) {
    float* ff;
    size_t n_ff;
    if (!get_f32(info, 9, &ff, &n_ff, "freqFactors")) return env.Undefined();
    if (!need(env, n_ff >= (size_t)rot / 2, "rope: freqFactors needs rotDims/2 values")) return env.Undefined();
    for (size_t i = 0; i < (size_t)rot / 2; ++i)
      if (!need(env, std::isfinite(ff[i]) && ff[i] > 0, "rope: freqFactors must be finite and > 0")) return env.Undefined();
    p.freq_factors = ff;
  }
  if (kRef) rope_ref(x, pos, rows, heads, hd, p);
  else rope(x, pos, rows, heads, hd, p, global_pool());
  return env.Undefined();
}

// embed(out, table, dtype, rows, cols, tokens)
template <bool kRef>
Napi::Value Embed(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float* out;
  size_t n_out, n_tok;
  Bytes table;
  int dtype, rows, cols;
  int32_t* tok;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_bytes(info, 1, &table, "table") || !get_int(info, 2, &dtype, "dtype") ||
      !get_int(info, 3, &rows, "rows", 1) || !get_int(info, 4, &cols, "cols", 1) || !get_i32(info, 5, &tok, &n_tok, "tokens"))
    return env.Undefined();
  if (!need(env, rows > 0 && cols > 0, "embed: rows and cols must be > 0") ||
      !check_convert_count(env, "embed: cols", dtype, (size_t)cols))
    return env.Undefined();
  if (!need(env, table.n >= gguf_row_bytes(dtype, cols) * (size_t)rows, "embed: table buffer too small for its shape") ||
      !need(env, n_out >= n_tok * (size_t)cols, "embed: out needs tokens*cols floats"))
    return env.Undefined();
  for (size_t i = 0; i < n_tok; ++i)
    if (tok[i] < 0 || tok[i] >= rows) {
      throw_code(env, "KVT_ERR_NATIVE_TOKEN",
                 "embed: token id " + std::to_string(tok[i]) + " out of range [0, " + std::to_string(rows) + ")");
      return env.Undefined();
    }
  if (kRef) embed_ref(out, table.p, dtype, rows, cols, tok, (int)n_tok);
  else embed(out, table.p, dtype, rows, cols, tok, (int)n_tok, global_pool());
  return env.Undefined();
}

}  // namespace

void register_elementwise(Napi::Env env, Napi::Object exports) {
  exports.Set("rmsNorm", Napi::Function::New(env, RmsNorm<false>));
  exports.Set("rmsNormRef", Napi::Function::New(env, RmsNorm<true>));
  exports.Set("softmax", Napi::Function::New(env, Softmax<false>));
  exports.Set("softmaxRef", Napi::Function::New(env, Softmax<true>));
  exports.Set("swiglu", Napi::Function::New(env, Binary<false, true>));
  exports.Set("swigluRef", Napi::Function::New(env, Binary<true, true>));
  exports.Set("add", Napi::Function::New(env, Binary<false, false>));
  exports.Set("addRef", Napi::Function::New(env, Binary<true, false>));
  exports.Set("rope", Napi::Function::New(env, Rope<false>));
  exports.Set("ropeRef", Napi::Function::New(env, Rope<true>));
  exports.Set("embed", Napi::Function::New(env, Embed<false>));
  exports.Set("embedRef", Napi::Function::New(env, Embed<true>));
}

}  // namespace kvt
