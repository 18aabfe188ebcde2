// Weight packing (at upload) and Q8_0 activation quantization (per call).
// Both are pure data movement / per-row arithmetic, so they are compiled once
// and shared by every ISA: the packed layout is the same for all of them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../kernels.h"
#include "matmul-legacy.h"
#include "matmul-kquant.h"
#include "../quant/blocks.h"
#include "../quant/quant.h"
#include "absmax.h"
#include "wide-clones.h"

namespace kvt {

size_t gguf_row_bytes(int dtype, int cols) {
  switch (dtype) {
    case F32: return (size_t)cols * 4;
    case F16:
    case BF16: return (size_t)cols * 2;
    case Q8_0: return (size_t)cols / kQ8Block * kQ8BlockBytes;
    default: {  // every other GGUF block type (quant/blocks.h)
      BlockGeometry g = block_geometry(dtype);
      return g.elems ? (size_t)cols / g.elems * g.bytes : 0;
    }
  }
}

static size_t panels_of(int rows) { return ((size_t)rows + kPanel - 1) / kPanel; }

size_t packed_weight_bytes(int dtype, int rows, int cols) {
  if (is_legacy_quant(dtype)) return legacy_packed_bytes(dtype, rows, cols);  // matmul-legacy-pack.cc
  if (is_kquant(dtype)) return kquant_packed_bytes(dtype, rows, cols);        // matmul-kquant-pack.cc
  size_t p = panels_of(rows);
  switch (dtype) {
    case F32: return p * (size_t)cols * kPanel * 4;
    case F16:
    case BF16: return p * (size_t)cols * kPanel * 2;
    case Q8_0: return p * ((size_t)cols / kQ8Block) * (kPanel * 2 + kPanel * kQ8Block);
    default: return 0;
  }
}

// Packs panels [p0, p1). Rows past `rows` are zero (their outputs are never stored).
static void pack_panels(uint8_t* dst, int dtype, int rows, int cols, const uint8_t* src, size_t p0, size_t p1) {
  const size_t row_bytes = gguf_row_bytes(dtype, cols);
  if (dtype == Q8_0) {
    const int nb = cols / kQ8Block;
    const size_t block_bytes = kPanel * 2 + kPanel * kQ8Block;
    for (size_t p = p0; p < p1; ++p) {
      for (int b = 0; b < nb; ++b) {
        uint8_t* out = dst + (p * nb + b) * block_bytes;
        uint16_t* d = reinterpret_cast<uint16_t*>(out);
        uint8_t* q = out + kPanel * 2;
        for (int j = 0; j < kPanel; ++j) {
          size_t n = p * kPanel + j;
          if (n >= (size_t)rows) {
            d[j] = 0;
            for (int g = 0; g < 8; ++g) std::memset(q + (g * kPanel + j) * 4, 128, 4);
            continue;
          }
          const uint8_t* blk = src + n * row_bytes + (size_t)b * kQ8BlockBytes;
          std::memcpy(&d[j], blk, 2);
          const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
          for (int g = 0; g < 8; ++g)
            for (int t = 0; t < 4; ++t) q[(g * kPanel + j) * 4 + t] = (uint8_t)(qs[g * 4 + t] + 128);
        }
      }
    }
    return;
  }
  const size_t es = dtype == F32 ? 4 : 2;
  for (size_t p = p0; p < p1; ++p) {
    uint8_t* out = dst + p * (size_t)cols * kPanel * es;
    for (int j = 0; j < kPanel; ++j) {
      size_t n = p * kPanel + j;
      if (n >= (size_t)rows) {
        for (int k = 0; k < cols; ++k) std::memset(out + ((size_t)k * kPanel + j) * es, 0, es);
        continue;
      }
      const uint8_t* row = src + n * row_bytes;
      if (es == 4) {
        for (int k = 0; k < cols; ++k) std::memcpy(out + ((size_t)k * kPanel + j) * 4, row + (size_t)k * 4, 4);
      } else {
        for (int k = 0; k < cols; ++k) std::memcpy(out + ((size_t)k * kPanel + j) * 2, row + (size_t)k * 2, 2);
      }
    }
  }
}

void pack_weight(uint8_t* dst, int dtype, int rows, int cols, const uint8_t* src, ThreadPool& pool) {
  if (is_legacy_quant(dtype))
    return parallel_for(pool, panels_of(rows), [&](size_t b, size_t e) { pack_legacy(dst, dtype, rows, cols, src, b, e); });
  if (is_kquant(dtype))
    return parallel_for(pool, panels_of(rows), [&](size_t b, size_t e) { pack_kquant(dst, dtype, rows, cols, src, b, e); });
  parallel_for(pool, panels_of(rows), [&](size_t b, size_t e) { pack_panels(dst, dtype, rows, cols, src, b, e); });
}

// Per block of 32: d = amax/127, q = round_even(x / d) — the same on every ISA
// because it is this one function. Cloned per target (wide-clones.h) so that
// nearbyintf is an inline round instruction over a vector, not a libm call per
// element (a tenth of a deepseek4 prefill's CPU): the same arithmetic, same bits.
KVT_WIDE_CLONES void quantize_rows_q8(Q8Rows out, const float* x, int m, int k) {
  const int nb = k / kQ8Block;
  for (int r = 0; r < m; ++r) {
    for (int b = 0; b < nb; ++b) {
      const float* xb = x + (size_t)r * k + (size_t)b * kQ8Block;
      // max |x_i| in vector lanes (absmax.h): the value of std::max over i in order
      const float amax = absmax_f32(xb, kQ8Block);
      float d = amax / 127.0f;
      float id = d != 0.0f ? 1.0f / d : 0.0f;
      int8_t* q = out.q + (size_t)r * k + (size_t)b * kQ8Block;
      int32_t sum = 0;
      for (int i = 0; i < kQ8Block; ++i) {
        float v = std::nearbyintf(xb[i] * id);
        v = std::min(127.0f, std::max(-127.0f, v));
        q[i] = (int8_t)v;
        sum += q[i];
      }
      out.d[(size_t)r * nb + b] = d;
      out.sum[(size_t)r * nb + b] = sum;
    }
  }
}

void dequantize(float* dst, const uint8_t* src, int dtype, size_t count) {
  switch (dtype) {
    case F32: std::memcpy(dst, src, count * 4); return;
    case F16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case BF16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case Q8_0: {
      for (size_t b = 0; b < count / kQ8Block; ++b) {
        const uint8_t* blk = src + b * kQ8BlockBytes;
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        float d = f16_to_f32(dh);
        const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
        for (int i = 0; i < kQ8Block; ++i) dst[b * kQ8Block + i] = d * (float)qs[i];
      }
      return;
    }
    default: dequantize_blocks(dst, src, dtype, count); return;  // quant/quant-dispatch.cc
  }
}

// Q8_0 as ggml writes it: d = amax/127 stored as f16, q = round(x/d).
void quantize(uint8_t* dst, const float* src, int dtype, size_t count) {
  switch (dtype) {
    case F32: std::memcpy(dst, src, count * 4); return;
    case F16: {
      uint16_t* d = reinterpret_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case BF16: {
      uint16_t* d = reinterpret_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case Q8_0: {
      for (size_t b = 0; b < count / kQ8Block; ++b) {
        const float* x = src + b * kQ8Block;
        float amax = 0.0f;
        for (int i = 0; i < kQ8Block; ++i) amax = std::max(amax, std::fabs(x[i]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t* blk = dst + b * kQ8BlockBytes;
        uint16_t dh = f32_to_f16(d);
        std::memcpy(blk, &dh, 2);
        int8_t* qs = reinterpret_cast<int8_t*>(blk + 2);
        for (int i = 0; i < kQ8Block; ++i) qs[i] = (int8_t)std::lround(x[i] * id);
      }
      return;
    }
    default: quantize_blocks(dst, src, dtype, count); return;  // quant/quant-dispatch.cc
  }
}

}  // namespace kvt
