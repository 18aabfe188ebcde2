// N-API bindings of the weight ops: packing, matmul and GGML type conversion,
// registered by addon.cc's Init. Every length is checked against the shape.
//   packedWeightBytes(dtype, rows, cols), packWeight(dtype, rows, cols, ggufBytes),
//   matmul / matmulRef(out, x, w, dtype, rows, cols, m),
//   dequantize(dst, src, dtype, count), quantize(dst, src, dtype, count)
#include "napi-args.h"

#include "dispatch.h"
#include "kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "thread-pool.h"

namespace kvt {
namespace {

Napi::Value PackedWeightBytes(const Napi::CallbackInfo& info) {
  int dtype, rows, cols;
  if (!get_int(info, 0, &dtype, "dtype") || !get_int(info, 1, &rows, "rows", 1) || !get_int(info, 2, &cols, "cols", 1))
    return info.Env().Undefined();
  if (!check_weight_shape(info.Env(), dtype, rows, cols)) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), (double)packed_weight_bytes(dtype, rows, cols));
}

// packWeight(dtype, rows, cols, ggufBytes) → ArrayBuffer (packed)
Napi::Value PackWeight(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int dtype, rows, cols;
  Bytes src;
  if (!get_int(info, 0, &dtype, "dtype") || !get_int(info, 1, &rows, "rows", 1) || !get_int(info, 2, &cols, "cols", 1) ||
      !get_bytes(info, 3, &src, "weight bytes"))
    return env.Undefined();
  if (!check_weight_shape(env, dtype, rows, cols)) return env.Undefined();
  size_t want = gguf_row_bytes(dtype, cols) * (size_t)rows;
  if (!need(env, src.n >= want,
            "weight bytes: need " + std::to_string(want) + " bytes for [" + std::to_string(rows) + "][" +
                std::to_string(cols) + "], got " + std::to_string(src.n)))
    return env.Undefined();
  Napi::ArrayBuffer ab = external_aligned(env, packed_weight_bytes(dtype, rows, cols));
  if (env.IsExceptionPending()) return env.Undefined();
  pack_weight(static_cast<uint8_t*>(ab.Data()), dtype, rows, cols, src.p, global_pool());
  return ab;
}

// matmul(out, x, packed, dtype, rows, cols, m) | matmulRef(out, x, gguf, dtype, rows, cols, m)
template <bool kRef>
Napi::Value Matmul(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *x;
  size_t n_out, n_x;
  Bytes w;
  int dtype, rows, cols, m;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &x, &n_x, "x") || !get_bytes(info, 2, &w, "w") ||
      !get_int(info, 3, &dtype, "dtype") || !get_int(info, 4, &rows, "rows", 1) || !get_int(info, 5, &cols, "cols", 1) ||
      !get_int(info, 6, &m, "m", 0))
    return env.Undefined();
  if (!check_weight_shape(env, dtype, rows, cols)) return env.Undefined();
  size_t want_w = kRef ? gguf_row_bytes(dtype, cols) * (size_t)rows : packed_weight_bytes(dtype, rows, cols);
  if (!need(env, w.n >= want_w, "matmul: weight buffer too small for its shape") ||
      !need(env, n_x >= (size_t)m * cols, "matmul: x needs m*cols = " + std::to_string((size_t)m * cols) + " floats") ||
      !need(env, n_out >= (size_t)m * rows, "matmul: out needs m*rows = " + std::to_string((size_t)m * rows) + " floats"))
    return env.Undefined();
  if (kRef) matmul_ref(out, x, w.p, dtype, rows, cols, m);
  else active_kernels().matmul(out, x, PackedWeight{dtype, rows, cols, w.p}, m, global_pool());
  return env.Undefined();
}

// dequantize(dst Float32Array, src bytes, dtype, count) / quantize(dst bytes, src Float32Array, dtype, count)
template <bool kQuantize>
Napi::Value Convert(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float* f;
  size_t n_f;
  Bytes b;
  int dtype, count;
  bool ok = kQuantize ? (get_bytes(info, 0, &b, "dst") && get_f32(info, 1, &f, &n_f, "src"))
                      : (get_f32(info, 0, &f, &n_f, "dst") && get_bytes(info, 1, &b, "src"));
  if (!ok || !get_int(info, 2, &dtype, "dtype") || !get_int(info, 3, &count, "count")) return env.Undefined();
  if (!check_convert_count(env, kQuantize ? "quantize" : "dequantize", dtype, (size_t)count) ||
      !need(env, n_f >= (size_t)count && b.n >= gguf_row_bytes(dtype, count), "buffers too small for count"))
    return env.Undefined();
  if (kQuantize && has_block_quantizer(dtype)) {
    // blocks quantize independently, so splitting across the pool keeps the bytes
    const BlockGeometry g = block_geometry(dtype);
    parallel_for(global_pool(), (size_t)count / g.elems, [&](size_t b0, size_t b1) {
      quantize(b.p + b0 * g.bytes, f + b0 * g.elems, dtype, (b1 - b0) * g.elems);
    }, 64);
  } else if (kQuantize) {
    quantize(b.p, f, dtype, count);
  } else {
    dequantize(f, b.p, dtype, count);
  }
  return env.Undefined();
}

}  // namespace

void register_weights(Napi::Env env, Napi::Object exports) {
  exports.Set("packedWeightBytes", Napi::Function::New(env, PackedWeightBytes));
  exports.Set("packWeight", Napi::Function::New(env, PackWeight));
  exports.Set("matmul", Napi::Function::New(env, Matmul<false>));
  exports.Set("matmulRef", Napi::Function::New(env, Matmul<true>));
  exports.Set("dequantize", Napi::Function::New(env, Convert<false>));
  exports.Set("quantize", Napi::Function::New(env, Convert<true>));
}

}  // namespace kvt
