// N-API binding of the CUDA backend (addon `kvtier_cuda`), built only where
// nvcc exists (see kvtier-cuda.gypi). Thin: argument checks and conversions;
// every failure becomes a JS Error with a stable `code`
// (KVT_ERR_NATIVE_CUDA_<WHAT>) and the backend's message.
#include <napi.h>

#include <string>
#include <vector>

#include "../cuda-backend.h"

namespace {

const char* code_of(kvt_cuda_status st) {
  switch (st) {
    case KVT_CUDA_ERR_NO_DEVICE: return "KVT_ERR_NATIVE_CUDA_NO_DEVICE";
    case KVT_CUDA_ERR_INVALID: return "KVT_ERR_NATIVE_CUDA_INVALID";
    case KVT_CUDA_ERR_OOM: return "KVT_ERR_NATIVE_CUDA_OOM";
    case KVT_CUDA_ERR_UNSUPPORTED: return "KVT_ERR_NATIVE_CUDA_UNSUPPORTED";
    default: return "KVT_ERR_NATIVE_CUDA_RUNTIME";
  }
}

void throw_error(Napi::Env env, const char* code, const std::string& msg) {
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, code));
  e.ThrowAsJavaScriptException();
}

// Throws and returns true when st is an error.
bool failed(Napi::Env env, kvt_cuda_ctx* ctx, kvt_cuda_status st) {
  if (st == KVT_CUDA_OK) return false;
  throw_error(env, code_of(st), kvt_cuda_last_error(ctx));
  return true;
}

bool bad_args(const Napi::CallbackInfo& info, size_t n, const char* usage) {
  if (info.Length() >= n) return false;
  throw_error(info.Env(), "KVT_ERR_NATIVE_CUDA_INVALID", std::string("usage: ") + usage);
  return true;
}

struct Bytes {
  uint8_t* data = nullptr;
  size_t length = 0;
};

// A Buffer / TypedArray / ArrayBuffer argument as raw bytes.
bool bytes_of(Napi::Env env, const Napi::Value& v, Bytes* out, const char* what) {
  if (v.IsTypedArray()) {
    Napi::TypedArray ta = v.As<Napi::TypedArray>();
    out->data = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    out->length = ta.ByteLength();
    return true;
  }
  if (v.IsArrayBuffer()) {
    Napi::ArrayBuffer ab = v.As<Napi::ArrayBuffer>();
    out->data = static_cast<uint8_t*>(ab.Data());
    out->length = ab.ByteLength();
    return true;
  }
  throw_error(env, "KVT_ERR_NATIVE_CUDA_INVALID", std::string(what) + " must be a TypedArray or ArrayBuffer");
  return false;
}

bool int32s_of(Napi::Env env, const Napi::Value& v, const int32_t** data, size_t* n, const char* what) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    throw_error(env, "KVT_ERR_NATIVE_CUDA_INVALID", std::string(what) + " must be an Int32Array");
    return false;
  }
  Napi::Int32Array a = v.As<Napi::Int32Array>();
  *data = a.Data();
  *n = a.ElementLength();
  return true;
}

template <typename T>
T* handle(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsExternal()) {
    throw_error(env, "KVT_ERR_NATIVE_CUDA_INVALID", std::string(what) + " handle expected");
    return nullptr;
  }
  T* p = v.As<Napi::External<T>>().Data();
  if (!p) throw_error(env, "KVT_ERR_NATIVE_CUDA_INVALID", std::string(what) + " was already destroyed");
  return p;
}

// Contexts and models are released explicitly (destroy*); the finalizers only
// cover handles that were dropped without it.
struct CtxBox { kvt_cuda_ctx* ctx; };
struct ModelBox { kvt_cuda_model* model; kvt_cuda_ctx* ctx; };

kvt_cuda_ctx* ctx_of(const Napi::CallbackInfo& info, size_t i) {
  CtxBox* b = handle<CtxBox>(info.Env(), info[i], "context");
  if (b && !b->ctx) {
    throw_error(info.Env(), "KVT_ERR_NATIVE_CUDA_INVALID", "context was already destroyed");
    return nullptr;
  }
  return b ? b->ctx : nullptr;
}

int32_t i32(const Napi::CallbackInfo& info, size_t i) { return info[i].As<Napi::Number>().Int32Value(); }
double num(const Napi::CallbackInfo& info, size_t i) { return info[i].As<Napi::Number>().DoubleValue(); }

Napi::Value Probe(const Napi::CallbackInfo& info) {
  char reason[256] = {0};
  const int n = kvt_cuda_device_count(reason, sizeof reason);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("devices", n);
  o.Set("reason", reason);
  return o;
}

Napi::Value CreateContext(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int device = info.Length() > 0 ? i32(info, 0) : 0;
  kvt_cuda_ctx* ctx = nullptr;
  char err[256] = {0};
  const kvt_cuda_status st = kvt_cuda_create(device, &ctx, err, sizeof err);
  if (st != KVT_CUDA_OK) {
    throw_error(env, code_of(st), err);
    return env.Undefined();
  }
  return Napi::External<CtxBox>::New(env, new CtxBox{ctx}, [](Napi::Env, CtxBox* b) {
    kvt_cuda_destroy(b->ctx);
    delete b;
  });
}

Napi::Value DestroyContext(const Napi::CallbackInfo& info) {
  CtxBox* b = handle<CtxBox>(info.Env(), info[0], "context");
  if (b && b->ctx) {
    kvt_cuda_destroy(b->ctx);
    b->ctx = nullptr;
  }
  return info.Env().Undefined();
}

Napi::Value DeviceInfo(const Napi::CallbackInfo& info) {
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (!ctx) return info.Env().Undefined();
  char name[256] = {0};
  int sms = 0, cc = 0;
  size_t total = 0;
  kvt_cuda_device_info(ctx, name, sizeof name, &sms, &total, &cc);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("name", name);
  o.Set("smCount", sms);
  o.Set("totalBytes", (double)total);
  o.Set("computeCapability", cc);
  return o;
}

Napi::Value UploadWeight(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (bad_args(info, 5, "uploadWeight(ctx, dtype, rows, cols, data)")) return env.Undefined();
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  Bytes b;
  if (!ctx || !bytes_of(env, info[4], &b, "weight data")) return env.Undefined();
  const int dtype = i32(info, 1), rows = i32(info, 2), cols = i32(info, 3);
  const size_t n = (size_t)rows * cols;
  const size_t want = dtype == KVT_F32 ? n * 4 : dtype == KVT_Q8_0 ? n / 32 * 34 : n * 2;
  if (rows <= 0 || cols <= 0 || b.length != want) {
    throw_error(env, "KVT_ERR_NATIVE_CUDA_INVALID",
                "weight data has " + std::to_string(b.length) + " bytes, [" + std::to_string(rows) + "," +
                    std::to_string(cols) + "] of dtype " + std::to_string(dtype) + " needs " + std::to_string(want));
    return env.Undefined();
  }
  int32_t id = -1;
  if (failed(env, ctx, kvt_cuda_weight_upload(ctx, dtype, rows, cols, b.data, &id))) return env.Undefined();
  return Napi::Number::New(env, id);
}

Napi::Value WeightBytes(const Napi::CallbackInfo& info) {
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (!ctx) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), (double)kvt_cuda_weight_bytes(ctx));
}

Napi::Value KvPoolCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (bad_args(info, 5, "kvPoolCreate(ctx, layers, kvHeads, headDim, pages)")) return env.Undefined();
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (!ctx) return env.Undefined();
  if (failed(env, ctx, kvt_cuda_kv_pool_create(ctx, i32(info, 1), i32(info, 2), i32(info, 3), i32(info, 4))))
    return env.Undefined();
  return Napi::Number::New(env, (double)kvt_cuda_kv_page_bytes(ctx));
}

// Pinned host memory as an ArrayBuffer (freed by its finalizer): the staging
// buffers for imports and exports that the DMA engines read without a bounce.
Napi::Value AllocPinned(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (bad_args(info, 2, "allocPinned(ctx, bytes)")) return env.Undefined();
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (!ctx) return env.Undefined();
  const size_t bytes = (size_t)num(info, 1);
  void* p = nullptr;
  if (failed(env, ctx, kvt_cuda_host_alloc(ctx, bytes, &p))) return env.Undefined();
  return Napi::ArrayBuffer::New(env, p, bytes, [](Napi::Env, void* data) { kvt_cuda_host_free(nullptr, data); });
}

Napi::Value KvImport(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (bad_args(info, 4, "kvImport(ctx, pageIds, src, stride)")) return env.Undefined();
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  const int32_t* pages;
  size_t n;
  Bytes src;
  if (!ctx || !int32s_of(env, info[1], &pages, &n, "pageIds") || !bytes_of(env, info[2], &src, "src"))
    return env.Undefined();
  const size_t stride = (size_t)num(info, 3);
  if (n && (n - 1) * stride + kvt_cuda_kv_page_bytes(ctx) > src.length) {
    throw_error(env, "KVT_ERR_NATIVE_CUDA_INVALID", "import source is smaller than pageIds.length pages at this stride");
    return env.Undefined();
  }
  failed(env, ctx, kvt_cuda_kv_import(ctx, pages, (int)n, src.data, stride));
  return env.Undefined();
}

Napi::Value KvImportWait(const Napi::CallbackInfo& info) {
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (ctx) failed(info.Env(), ctx, kvt_cuda_kv_import_wait(ctx));
  return info.Env().Undefined();
}

Napi::Value KvExport(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (bad_args(info, 4, "kvExport(ctx, pageIds, dst, stride)")) return env.Undefined();
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  const int32_t* pages;
  size_t n;
  Bytes dst;
  if (!ctx || !int32s_of(env, info[1], &pages, &n, "pageIds") || !bytes_of(env, info[2], &dst, "dst"))
    return env.Undefined();
  const size_t stride = (size_t)num(info, 3);
  if (n && (n - 1) * stride + kvt_cuda_kv_page_bytes(ctx) > dst.length) {
    throw_error(env, "KVT_ERR_NATIVE_CUDA_INVALID", "export destination is smaller than pageIds.length pages at this stride");
    return env.Undefined();
  }
  uint64_t ticket = 0;
  if (failed(env, ctx, kvt_cuda_kv_export(ctx, pages, (int)n, dst.data, stride, &ticket))) return env.Undefined();
  return Napi::Number::New(env, (double)ticket);
}

Napi::Value KvExportPoll(const Napi::CallbackInfo& info) {
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (!ctx) return info.Env().Undefined();
  const int r = kvt_cuda_kv_export_poll(ctx, (uint64_t)num(info, 1));
  if (r < 0) {
    failed(info.Env(), ctx, (kvt_cuda_status)-r);
    return info.Env().Undefined();
  }
  return Napi::Boolean::New(info.Env(), r == 1);
}

Napi::Value KvExportWait(const Napi::CallbackInfo& info) {
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (ctx) failed(info.Env(), ctx, kvt_cuda_kv_export_wait(ctx, (uint64_t)num(info, 1)));
  return info.Env().Undefined();
}

Napi::Value ModelCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (bad_args(info, 2, "modelCreate(ctx, config)")) return env.Undefined();
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (!ctx || !info[1].IsObject()) return env.Undefined();
  Napi::Object o = info[1].As<Napi::Object>();
  auto get = [&](const char* k) { return o.Get(k).IsNumber() ? o.Get(k).As<Napi::Number>().DoubleValue() : -1.0; };
  kvt_llama_config c;
  c.n_vocab = (int)get("nVocab");
  c.d_model = (int)get("dModel");
  c.n_layer = (int)get("nLayer");
  c.n_head = (int)get("nHead");
  c.n_kv_head = (int)get("nKvHead");
  c.head_dim = (int)get("headDim");
  c.d_ffn = (int)get("dFfn");
  c.rms_eps = (float)get("rmsEps");
  c.rope_base = (float)get("ropeBase");
  c.rope_mode = (int)get("ropeMode");
  kvt_cuda_model* m = nullptr;
  if (failed(env, ctx, kvt_cuda_model_create(ctx, &c, &m))) return env.Undefined();
  return Napi::External<ModelBox>::New(env, new ModelBox{m, ctx}, [](Napi::Env, ModelBox* b) {
    // A context destroyed first already synchronised; the model's scratch is
    // plain device memory released with the process in that case.
    delete b;
  });
}

Napi::Value ModelDestroy(const Napi::CallbackInfo& info) {
  ModelBox* b = handle<ModelBox>(info.Env(), info[0], "model");
  if (b && b->model) {
    kvt_cuda_model_destroy(b->model);
    b->model = nullptr;
  }
  return info.Env().Undefined();
}

Napi::Value ModelBind(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (bad_args(info, 3, "modelBind(model, tensorName, weightId)")) return env.Undefined();
  ModelBox* b = handle<ModelBox>(env, info[0], "model");
  if (!b || !b->model) return env.Undefined();
  failed(env, b->ctx, kvt_cuda_model_bind(b->model, info[1].As<Napi::String>().Utf8Value().c_str(), i32(info, 2)));
  return env.Undefined();
}

// forward(model, tokens, pos0, blockTable, logits: 'none'|'last'|'all') →
//   { greedy: Int32Array, logits?: Float32Array }
Napi::Value Forward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (bad_args(info, 5, "forward(model, tokens, pos0, blockTable, logits)")) return env.Undefined();
  ModelBox* b = handle<ModelBox>(env, info[0], "model");
  if (!b || !b->model) return env.Undefined();
  const int32_t *tokens, *table;
  size_t t, n_blocks;
  if (!int32s_of(env, info[1], &tokens, &t, "tokens") || !int32s_of(env, info[3], &table, &n_blocks, "blockTable"))
    return env.Undefined();
  const std::string mode = info[4].As<Napi::String>().Utf8Value();
  const bool all = mode == "all";
  const size_t rows = all ? t : 1;
  Napi::Object out = Napi::Object::New(env);
  Napi::Int32Array greedy = Napi::Int32Array::New(env, rows);
  Napi::Float32Array logits;
  float* logits_ptr = nullptr;
  if (mode != "none") {
    kvt_llama_config cfg;
    kvt_cuda_model_config(b->model, &cfg);
    const size_t vocab = (size_t)cfg.n_vocab;
    logits = Napi::Float32Array::New(env, rows * vocab);
    logits_ptr = logits.Data();
  }
  if (failed(env, b->ctx, kvt_cuda_forward(b->model, tokens, (int)t, i32(info, 2), table, (int)n_blocks,
                                           logits_ptr, greedy.Data(), all ? 1 : 0)))
    return env.Undefined();
  out.Set("greedy", greedy);
  if (logits_ptr) out.Set("logits", logits);
  return out;
}

// ---- op level ----
Napi::Value BufferAlloc(const Napi::CallbackInfo& info) {
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (!ctx) return info.Env().Undefined();
  int32_t id = -1;
  if (failed(info.Env(), ctx, kvt_cuda_buffer_alloc(ctx, (size_t)num(info, 1), &id))) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), id);
}
Napi::Value BufferFree(const Napi::CallbackInfo& info) {
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  if (ctx) failed(info.Env(), ctx, kvt_cuda_buffer_free(ctx, i32(info, 1)));
  return info.Env().Undefined();
}
Napi::Value BufferWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  Bytes b;
  if (!ctx || !bytes_of(env, info[3], &b, "data")) return env.Undefined();
  failed(env, ctx, kvt_cuda_buffer_write(ctx, i32(info, 1), (size_t)num(info, 2), b.data, b.length));
  return env.Undefined();
}
Napi::Value BufferRead(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  kvt_cuda_ctx* ctx = ctx_of(info, 0);
  Bytes b;
  if (!ctx || !bytes_of(env, info[3], &b, "data")) return env.Undefined();
  failed(env, ctx, kvt_cuda_buffer_read(ctx, i32(info, 1), (size_t)num(info, 2), b.data, b.length));
  return env.Undefined();
}

// A view argument: [bufferId, offsetElems, lengthElems].
kvt_cuda_view view_of(const Napi::CallbackInfo& info, size_t i) {
  kvt_cuda_view v{-1, 0, 0};
  if (!info[i].IsArray()) return v;  // buffer -1: the op reports an unknown buffer
  Napi::Array a = info[i].As<Napi::Array>();
  v.buffer = a.Get(0u).As<Napi::Number>().Int32Value();
  v.offset = (uint64_t)a.Get(1u).As<Napi::Number>().DoubleValue();
  v.length = (uint64_t)a.Get(2u).As<Napi::Number>().DoubleValue();
  return v;
}

const int32_t* i32s(const Napi::CallbackInfo& info, size_t i, size_t* n) {
  const int32_t* p = nullptr;
  *n = 0;
  if (!int32s_of(info.Env(), info[i], &p, n, "metadata")) return nullptr;
  return p;
}

#define OP(name, nargs, usage, ...)                                  \
  Napi::Value name(const Napi::CallbackInfo& info) {                 \
    if (bad_args(info, nargs, usage)) return info.Env().Undefined(); \
    kvt_cuda_ctx* ctx = ctx_of(info, 0);                             \
    if (ctx) { __VA_ARGS__; }                                        \
    return info.Env().Undefined();                                   \
  }
OP(OpMatmul, 6, "opMatmul(ctx, y, x, weight, m, accumulate)",
   failed(info.Env(), ctx, kvt_cuda_op_matmul(ctx, view_of(info, 1), view_of(info, 2), i32(info, 3), i32(info, 4), i32(info, 5))))
OP(OpRmsnorm, 6, "opRmsnorm(ctx, y, x, gain, rows, eps)",
   failed(info.Env(), ctx, kvt_cuda_op_rmsnorm(ctx, view_of(info, 1), view_of(info, 2), i32(info, 3), i32(info, 4), (float)num(info, 5))))
OP(OpRope, 9, "opRope(ctx, x, positions, rows, heads, headDim, rot, base, mode)", {
  size_t n;
  const int32_t* pos = i32s(info, 2, &n);
  if (pos && n < (size_t)i32(info, 3)) throw_error(info.Env(), "KVT_ERR_NATIVE_CUDA_INVALID", "positions shorter than rows");
  else if (pos)
    failed(info.Env(), ctx, kvt_cuda_op_rope(ctx, view_of(info, 1), pos, i32(info, 3), i32(info, 4), i32(info, 5),
                                             i32(info, 6), (float)num(info, 7), i32(info, 8)));
})
OP(OpSwiglu, 5, "opSwiglu(ctx, out, gate, up, n)",
   failed(info.Env(), ctx, kvt_cuda_op_swiglu(ctx, view_of(info, 1), view_of(info, 2), view_of(info, 3), (size_t)num(info, 4))))
OP(OpAdd, 5, "opAdd(ctx, out, a, b, n)",
   failed(info.Env(), ctx, kvt_cuda_op_add(ctx, view_of(info, 1), view_of(info, 2), view_of(info, 3), (size_t)num(info, 4))))
OP(OpEmbed, 4, "opEmbed(ctx, out, tableWeight, tokens)", {
  size_t n;
  const int32_t* tok = i32s(info, 3, &n);
  if (tok) failed(info.Env(), ctx, kvt_cuda_op_embed(ctx, view_of(info, 1), i32(info, 2), tok, (int)n));
})
OP(OpSoftmax, 4, "opSoftmax(ctx, x, rows, n)",
   failed(info.Env(), ctx, kvt_cuda_op_softmax(ctx, view_of(info, 1), i32(info, 2), i32(info, 3))))
OP(OpArgmax, 5, "opArgmax(ctx, out, x, rows, n)",
   failed(info.Env(), ctx, kvt_cuda_op_argmax(ctx, view_of(info, 1), view_of(info, 2), i32(info, 3), i32(info, 4))))
OP(OpKvWrite, 7, "opKvWrite(ctx, layer, blockTable, pos0, n, k, v)", {
  size_t nb;
  const int32_t* table = i32s(info, 2, &nb);
  if (table)
    failed(info.Env(), ctx, kvt_cuda_op_kv_write(ctx, i32(info, 1), table, (int)nb, i32(info, 3), i32(info, 4),
                                                 view_of(info, 5), view_of(info, 6)));
})
// opAttention(ctx, out, q, layer, heads, scale, tables, tableLens, pos0, queries)
OP(OpAttention, 10, "opAttention(ctx, out, q, layer, heads, scale, tables, tableLens, pos0, queries)", {
  size_t nt, nl, np, nq;
  const int32_t* tables = i32s(info, 6, &nt);
  const int32_t* lens = tables ? i32s(info, 7, &nl) : nullptr;
  const int32_t* p0 = lens ? i32s(info, 8, &np) : nullptr;
  const int32_t* qs = p0 ? i32s(info, 9, &nq) : nullptr;
  if (qs) {
    size_t total = 0;
    for (size_t i = 0; i < nl; ++i) total += (size_t)(lens[i] > 0 ? lens[i] : 0);
    if (nl != np || nl != nq || total != nt)
      throw_error(info.Env(), "KVT_ERR_NATIVE_CUDA_INVALID",
                  "attention segments: tableLens, pos0 and queries must have one entry per segment and tables sum(tableLens) entries");
    else
      failed(info.Env(), ctx, kvt_cuda_op_attention(ctx, view_of(info, 1), view_of(info, 2), i32(info, 3), i32(info, 4),
                                                    (float)num(info, 5), (int)nl, tables, lens, p0, qs));
  }
})
OP(Synchronize, 1, "synchronize(ctx)", failed(info.Env(), ctx, kvt_cuda_synchronize(ctx)))
OP(KvPoolFree, 1, "kvPoolFree(ctx)", failed(info.Env(), ctx, kvt_cuda_kv_pool_free(ctx)))
#undef OP

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("abiVersion", Napi::Number::New(env, 1));
  exports.Set("pageTokens", Napi::Number::New(env, KVT_PAGE_TOKENS));
  const struct { const char* name; Napi::Function::Callback fn; } fns[] = {
      {"probe", Probe}, {"createContext", CreateContext}, {"destroyContext", DestroyContext},
      {"deviceInfo", DeviceInfo}, {"uploadWeight", UploadWeight}, {"weightBytes", WeightBytes},
      {"kvPoolCreate", KvPoolCreate}, {"allocPinned", AllocPinned}, {"kvImport", KvImport},
      {"kvImportWait", KvImportWait}, {"kvExport", KvExport}, {"kvExportPoll", KvExportPoll},
      {"kvExportWait", KvExportWait}, {"modelCreate", ModelCreate}, {"modelDestroy", ModelDestroy},
      {"modelBind", ModelBind}, {"forward", Forward}, {"bufferAlloc", BufferAlloc},
      {"bufferFree", BufferFree}, {"bufferWrite", BufferWrite}, {"bufferRead", BufferRead},
      {"opMatmul", OpMatmul}, {"opRmsnorm", OpRmsnorm}, {"opRope", OpRope}, {"opSwiglu", OpSwiglu},
      {"opAdd", OpAdd}, {"opEmbed", OpEmbed}, {"opSoftmax", OpSoftmax}, {"opArgmax", OpArgmax},
      {"opKvWrite", OpKvWrite}, {"opAttention", OpAttention}, {"synchronize", Synchronize},
      {"kvPoolFree", KvPoolFree},
  };
  for (const auto& f : fns) exports.Set(f.name, Napi::Function::New(env, f.fn, f.name));
  return exports;
}

}  // namespace

NODE_API_MODULE(kvtier_cuda, Init)
