// N-API entry point of the kvtier compute core.
#include <napi.h>

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("abiVersion", Napi::Number::New(env, 1));
  return exports;
}

NODE_API_MODULE(kvtier_native, Init)
