// Host-side helpers of the standalone driver: deterministic random tensors,
// random llama models, and their upload through the C API.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../cuda-backend.h"
#include "../ref/llama-ref.h"

namespace kvt_driver {

// xorshift64*: reproducible across machines (no std::distribution variance).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 1) {}
  uint64_t next() {
    s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dull;
  }
  float uniform() { return (float)(next() >> 40) * (2.f / 16777216.f) - 1.f; }  // [-1, 1)
};

void fill_uniform(std::vector<float>& v, Rng& rng, float scale);
// A [rows][cols] weight of `type` with values uniform in [-scale, scale]
// (Q8_0: quantised from such values, per-block absmax scales).
kvt_ref::HostWeight random_weight(int type, int rows, int cols, Rng& rng, float scale);
kvt_ref::HostLlama random_llama(const kvt_llama_config& cfg, int type, uint64_t seed);

// Uploads every tensor of `m` and binds it; returns KVT_CUDA_OK or the failure.
kvt_cuda_status upload_llama(kvt_cuda_ctx* ctx, const kvt_ref::HostLlama& m, kvt_cuda_model** out);

// Minimal GGUF (v2/v3) reader for llama-architecture files with F32/F16/BF16/
// Q8_0 tensors. Throws std::runtime_error saying what is unsupported.
kvt_ref::HostLlama read_gguf_llama(const std::string& path);

}  // namespace kvt_driver
