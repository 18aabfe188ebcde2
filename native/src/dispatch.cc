#include "dispatch.h"

#include <atomic>

namespace kvt {

namespace {

bool cpu_has_avx2() {
#if defined(KVT_HAVE_X86)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(KVT_HAVE_X86)
  // the avx512 library also uses VNNI (Q8_0 dots) and BW/VL (masked f16 loads)
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

const Kernels* table_for(const std::string& name) {
  if (name == "scalar") return kernels_scalar();
  if (name == "avx2") return cpu_has_avx2() ? kernels_avx2() : nullptr;
  if (name == "avx512") return cpu_has_avx512() ? kernels_avx512() : nullptr;
  return nullptr;
}

const Kernels* best() {
  auto isas = available_isas();
  return table_for(isas.back());
}

std::atomic<const Kernels*> g_active{nullptr};

}  // namespace

std::vector<std::string> available_isas() {
  std::vector<std::string> out{"scalar"};
  if (cpu_has_avx2() && kernels_avx2()) out.push_back("avx2");
  if (cpu_has_avx512() && kernels_avx512()) out.push_back("avx512");
  return out;
}

const Kernels& active_kernels() {
  const Kernels* k = g_active.load(std::memory_order_acquire);
  if (!k) {
    k = best();
    g_active.store(k, std::memory_order_release);
  }
  return *k;
}

bool set_isa(const std::string& name, std::string* why) {
  if (name != "scalar" && name != "avx2" && name != "avx512") {
    *why = "unknown ISA '" + name + "': use scalar, avx2 or avx512";
    return false;
  }
  const Kernels* k = table_for(name);
  if (!k) {
    std::string have;
    for (auto& s : available_isas()) have += (have.empty() ? "" : ", ") + s;
    *why = "ISA '" + name + "' is not supported by this CPU or build (available: " + have + ")";
    return false;
  }
  g_active.store(k, std::memory_order_release);
  return true;
}

}  // namespace kvt
