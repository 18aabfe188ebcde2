// Definitions of napi-args.h: see there.
#include "napi-args.h"

#include "memory.h"
#include "ops/matmul-kquant.h"
#include "ops/matmul-legacy.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace kvt {

void throw_code(Napi::Env env, const char* code, const std::string& msg) {
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, code));
  e.ThrowAsJavaScriptException();
}

// ArrayBuffer or any ArrayBufferView.
bool get_bytes(const Napi::CallbackInfo& info, size_t i, Bytes* out, const char* what) {
  Napi::Value v = info[i];
  if (v.IsArrayBuffer()) {
    auto ab = v.As<Napi::ArrayBuffer>();
    out->p = static_cast<uint8_t*>(ab.Data());
    out->n = ab.ByteLength();
    return true;
  }
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    out->p = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    out->n = ta.ByteLength();
    return true;
  }
  if (v.IsDataView()) {
    auto dv = v.As<Napi::DataView>();
    out->p = static_cast<uint8_t*>(dv.ArrayBuffer().Data()) + dv.ByteOffset();
    out->n = dv.ByteLength();
    return true;
  }
  throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected an ArrayBuffer or typed array");
  return false;
}

bool get_int(const Napi::CallbackInfo& info, size_t i, int* out, const char* what, int lo, int hi) {
  Napi::Value v = info[i];
  if (!v.IsNumber()) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected an integer");
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (d != (double)(int64_t)d || d < lo || d > hi) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG",
               std::string(what) + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   "], got " + std::to_string(d));
    return false;
  }
  *out = (int)d;
  return true;
}

bool get_float(const Napi::CallbackInfo& info, size_t i, float* out, const char* what) {
  if (!info[i].IsNumber()) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected a number");
    return false;
  }
  *out = (float)info[i].As<Napi::Number>().DoubleValue();
  return true;
}

bool need(Napi::Env env, bool ok, const std::string& msg) {
  if (!ok) throw_code(env, "KVT_ERR_NATIVE_SHAPE", msg);
  return ok;
}

namespace {

bool valid_weight_dtype(int d) {
  return d == F32 || d == F16 || d == BF16 || d == Q8_0 || is_legacy_quant(d) ||  // ops/matmul-legacy.h
         is_kquant(d);                                                             // ops/matmul-kquant.h
}

// Types quantize/dequantize/embed accept: the weight types plus every type
// with a block quantizer (quant/quant.h), matmul kernel or not.
bool valid_convert_dtype(int d) { return valid_weight_dtype(d) || has_block_quantizer(d); }

}  // namespace

bool check_convert_count(Napi::Env env, const char* what, int dtype, size_t count) {
  if (!need(env, valid_convert_dtype(dtype),
            std::string(what) + ": dtype " + std::to_string(dtype) +
                " is not a GGML type id kvtier converts (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, "
                "IQ4_NL, IQ4_XS)"))
    return false;
  const int qk = block_geometry(dtype).elems;
  return need(env, count % (size_t)qk == 0,
              std::string(what) + ": count " + std::to_string(count) + " must be a multiple of the type's block of " +
                  std::to_string(qk) + " values");
}

bool check_weight_shape(Napi::Env env, int dtype, int rows, int cols) {
  if (!need(env, valid_weight_dtype(dtype),
            "weight dtype must be a GGML type id: 0 (F32), 1 (F16), 2 (Q4_0), 3 (Q4_1), 6 (Q5_0), 7 (Q5_1), 8 (Q8_0), "
            "10..14 (Q2_K..Q6_K), 20 (IQ4_NL), 23 (IQ4_XS), 30 (BF16)"))
    return false;
  const int qk = block_geometry(dtype).elems;  // 1, 32 or 256 values per block
  return need(env, rows > 0 && cols > 0, "weight rows and cols must be > 0") &&
         need(env, cols % qk == 0, "weights of GGML type " + std::to_string(dtype) + " need cols % " + std::to_string(qk) +
                                       " == 0 (whole blocks per row), got cols = " + std::to_string(cols));
}

bool typed_bytes(const Napi::Value& v, uint8_t** p, size_t* n, napi_typedarray_type type) {
  if (!v.IsTypedArray()) return false;
  auto ta = v.As<Napi::TypedArray>();
  if (type != (napi_typedarray_type)-1 && ta.TypedArrayType() != type) return false;
  *p = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
  *n = ta.ByteLength();
  return true;
}

bool whole_number(const Napi::Value& v, double lo, double hi, double* out) {
  if (!v.IsNumber()) return false;
  const double d = v.As<Napi::Number>().DoubleValue();
  *out = d;
  return d >= lo && d <= hi && d == (double)(int64_t)d;
}

namespace {
struct AlignedHint {
  size_t bytes;
};

}  // namespace

Napi::ArrayBuffer external_aligned(Napi::Env env, size_t bytes) {
  void* p = alloc_aligned(bytes);
  if (!p) {
    throw_code(env, "KVT_ERR_NATIVE_OOM", "could not allocate " + std::to_string(bytes) + " bytes");
    return Napi::ArrayBuffer();
  }
  Napi::MemoryManagement::AdjustExternalMemory(env, (int64_t)bytes);
  return Napi::ArrayBuffer::New(
      env, p, bytes,
      [](Napi::Env e, void* data, AlignedHint* hint) {
        Napi::MemoryManagement::AdjustExternalMemory(e, -(int64_t)hint->bytes);
        free_aligned(data, hint->bytes);
        delete hint;
      },
      new AlignedHint{bytes});
}

}  // namespace kvt
