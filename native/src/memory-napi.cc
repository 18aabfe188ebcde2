// N-API bindings of JS-owned memory (memory.h): aligned buffers and file
// mappings, registered by addon.cc's Init.
//   allocAligned(bytes) → ArrayBuffer; mmapFile(path) → ArrayBuffer; unmapFile(ab) → bool
#include "napi-args.h"

#include <mutex>
#include <unordered_map>

#include "memory.h"

namespace kvt {
namespace {

// Live file mappings by base address: unmapFile and the GC finalizer race for
// each entry; whoever erases it unmaps. An address is not an identity: after
// unmapFile the kernel may hand the same address to the next mapping while the
// first ArrayBuffer still awaits collection, so each mapping carries a serial
// and a finalizer only erases the entry whose serial it was given.
struct LiveMapping {
  Mapping mapping;
  uint64_t serial;
};
struct MappingTicket {
  void* addr;
  uint64_t serial;
};
std::mutex g_map_mutex;
std::unordered_map<void*, LiveMapping> g_maps;
uint64_t g_next_map_serial = 1;

Napi::Value AllocAligned(const Napi::CallbackInfo& info) {
  Napi::Value v = info[0];
  if (!v.IsNumber() || v.As<Napi::Number>().DoubleValue() < 0) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", "allocAligned: expected a byte count >= 0");
    return info.Env().Undefined();
  }
  return external_aligned(info.Env(), (size_t)v.As<Napi::Number>().DoubleValue());
}

Napi::Value MmapFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "mmapFile: expected a path string");
    return env.Undefined();
  }
  Mapping m;
  std::string why;
  if (!map_file(info[0].As<Napi::String>().Utf8Value(), &m, &why)) {
    throw_code(env, "KVT_ERR_NATIVE_MMAP", why);
    return env.Undefined();
  }
  if (m.bytes == 0) return Napi::ArrayBuffer::New(env, 0);
  auto* ticket = new MappingTicket{m.addr, 0};
  {
    std::lock_guard<std::mutex> lock(g_map_mutex);
    ticket->serial = g_next_map_serial++;
    g_maps[m.addr] = LiveMapping{m, ticket->serial};
  }
  return Napi::ArrayBuffer::New(
      env, m.addr, m.bytes,
      [](Napi::Env, void*, MappingTicket* t) {
        Mapping found{nullptr, 0};
        {
          std::lock_guard<std::mutex> lock(g_map_mutex);
          auto it = g_maps.find(t->addr);
          if (it != g_maps.end() && it->second.serial == t->serial) {
            found = it->second.mapping;
            g_maps.erase(it);
          }
        }
        delete t;
        unmap(found);
      },
      ticket);
}

// Detaches the buffer (every view of it reads as length 0 afterwards) and unmaps.
Napi::Value UnmapFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArrayBuffer()) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "unmapFile: expected the ArrayBuffer returned by mmapFile");
    return env.Undefined();
  }
  auto ab = info[0].As<Napi::ArrayBuffer>();
  void* data = ab.Data();
  Mapping found{nullptr, 0};
  {
    std::lock_guard<std::mutex> lock(g_map_mutex);
    auto it = g_maps.find(data);
    if (it == g_maps.end()) return Napi::Boolean::New(env, false);
    found = it->second.mapping;
    g_maps.erase(it);
  }
  if (!ab.IsDetached()) ab.Detach();
  unmap(found);
  return Napi::Boolean::New(env, true);
}

}  // namespace

void register_memory(Napi::Env env, Napi::Object exports) {
  exports.Set("allocAligned", Napi::Function::New(env, AllocAligned));
  exports.Set("mmapFile", Napi::Function::New(env, MmapFile));
  exports.Set("unmapFile", Napi::Function::New(env, UnmapFile));
}

}  // namespace kvt
