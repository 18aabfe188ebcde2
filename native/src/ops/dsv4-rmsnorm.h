// deepseek4 RMS norm of T rows, the arithmetic of rmsNorm in
// inference-core/engine/deepseek4-math.ts (the forward's TypeScript twin):
//
//   x, out [T][n] (out may be x)   w [n] or null (no weight)
//
//   ss = Σ_i x_i² in f64, i in order;  scale = f32(1 / sqrt(f64(f32(ss / n)) + eps))
//   out_i = f32(x_i · scale · w_i) in f64 (x_i · scale exact, one f64 rounding, one f32)
//
// The fast kernel splits rows over the pool's threads and runs four rows' sums
// side by side (each still one chain over i in order): the _ref twin's bits,
// for any T and thread count (test/native/dsv4-rows.test.ts).
#pragma once
#include <cstddef>

#include "../thread-pool.h"

namespace kvt {

void dsv4_rmsnorm_rows(float* out, const float* x, const float* w, int T, int n, double eps, ThreadPool& pool);
void dsv4_rmsnorm_rows_ref(float* out, const float* x, const float* w, int T, int n, double eps);

}  // namespace kvt
