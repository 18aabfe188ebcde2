// deepseek4's clamped SwiGLU (ggml_swiglu_clamp) over n values, the arithmetic
// of swigluClamp in inference-core/engine/deepseek4-math.ts:
//
//   out, g, u [n]   (an expert's [rows][F] gate and up mat-mul results, flat)
//   limit > 1e-6: g = min(g, L), u = clamp(u, −L, L);  out = f32(g / (1 + exp(−g)) · u), all in f64
//
// exp is the C library's, the TypeScript twin's V8's: equal but for exp's last
// f64 bit (test/native/dsv4-rows.test.ts states the tolerance). The fast kernel
// splits n over the pool's threads: the _ref twin's bits.
#pragma once
#include <cstddef>

#include "../thread-pool.h"

namespace kvt {

void dsv4_swiglu_clamp(float* out, const float* g, const float* u, size_t n, double limit, ThreadPool& pool);
void dsv4_swiglu_clamp_ref(float* out, const float* g, const float* u, size_t n, double limit);

}  // namespace kvt
