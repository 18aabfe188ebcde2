// The activation a ggml CPU mat-mul feeds a quantized weight (its vec_dot_type),
// as f32 again: quantize then dequantize, in one pass.
//
//   out, x  [n]   n a multiple of the block (q8_0: 32, q8_K: 256)
//
// q8_0 (quantize_row_q8_0_ref): per 32, d = amax/127 (f16-rounded when applied),
//   q = round-half-away(x · 1/d), out = f16(d) · q.
// q8_K (quantize_row_q8_K_ref): per 256, iscale = −127/max (max: the signed value
//   of largest |x|, first one wins), q = min(127, nearest-even(iscale · x)),
//   out = (1/iscale) · q; an all-zero block stays zero.
// The TypeScript functions roundTripQ8_0 / roundTripQ8K in
// inference-core/engine/deepseek4-weights.ts are the reference twin: the same
// arithmetic (divisions in f64 rounded once to f32, as JS computes them), so
// the two agree bit for bit (test/native/act-roundtrip.test.ts).
// Blocks are split over the pool's threads (each block whole, on one thread): the
// same bits for any thread count.
#pragma once
#include <cstddef>

#include "../thread-pool.h"

namespace kvt {

void act_roundtrip_q8_0(float* out, const float* x, size_t n, ThreadPool& pool);
void act_roundtrip_q8_k(float* out, const float* x, size_t n, ThreadPool& pool);

}  // namespace kvt
