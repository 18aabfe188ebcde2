// Packing of Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS weights into the
// panel layout of matmul-legacy.h (compiled once: the layout is the same for
// every ISA). Codes stay 4-bit (+1 bit for Q5), so the pack is as small as
// the GGUF bytes (IQ4_XS: +2 bytes per 256 values for byte-sized scales).
#include <algorithm>
#include <cmath>

#include "matmul-legacy.h"

namespace kvt {

size_t legacy_packed_bytes(int dtype, int rows, int cols) {
  const size_t panels = ((size_t)rows + kPanel - 1) / kPanel;
  return panels * ((size_t)cols / legacy_block_elems(dtype)) * legacy_pack(dtype).bytes;
}

// Writes the codes q[32] of row j of a panel's 32-column block into qs / qh.
static void put_codes(uint8_t* qs, uint8_t* qh, int j, const uint8_t* q) {
  for (int g = 0; g < 4; ++g)
    for (int t = 0; t < 4; ++t)
      qs[g * kQsGroupBytes + j * 4 + t] = (uint8_t)((q[4 * g + t] & 0xF) | ((q[16 + 4 * g + t] & 0xF) << 4));
  if (!qh) return;
  for (int t = 0; t < 4; ++t) {
    uint8_t bits = 0;
    for (int g = 0; g < 8; ++g) bits |= (uint8_t)(((q[4 * g + t] >> 4) & 1) << g);
    qh[j * 4 + t] = bits;
  }
}

void pack_legacy(uint8_t* dst, int dtype, int rows, int cols, const uint8_t* src, size_t p0, size_t p1) {
  const LegacyPack L = legacy_pack(dtype);
  const BlockGeometry geo = block_geometry(dtype);
  const int nb = cols / geo.elems;
  const size_t row_bytes = (size_t)nb * geo.bytes;
  for (size_t p = p0; p < p1; ++p) {
    for (int b = 0; b < nb; ++b) {
      uint8_t* out = dst + (p * nb + b) * L.bytes;
      std::memset(out, 0, L.bytes);
      uint16_t* d = reinterpret_cast<uint16_t*>(out + L.d);
      for (int j = 0; j < kPanel; ++j) {
        size_t n = p * kPanel + j;
        if (n >= (size_t)rows) continue;  // zero codes and scales: never stored
        const uint8_t* blk = src + n * row_bytes + (size_t)b * geo.bytes;
        if (dtype == IQ4_XS) {
          uint8_t q[kQKK];
          int8_t ls[kQKK / kQK];
          iq4xs_block_codes(blk, q, &d[j], ls);
          for (int ib = 0; ib < kQKK / kQK; ++ib) {
            reinterpret_cast<int8_t*>(out + L.ls)[ib * kPanel + j] = ls[ib];
            put_codes(out + L.qs + ib * kQsBlockBytes, nullptr, j, q + ib * kQK);
          }
          continue;
        }
        uint8_t q[kQK];
        uint16_t m;
        legacy_block_codes(dtype, blk, q, &d[j], &m);
        if (L.m >= 0) std::memcpy(out + L.m + j * 2, &m, 2);
        put_codes(out + L.qs, L.qh >= 0 ? out + L.qh : nullptr, j, q);
      }
    }
  }
}

void quantize_rows_q8k_ggml(Q8Rows out, const float* x, int m, int k) {
  for (int r = 0; r < m; ++r) {
    for (int sb = 0; sb < k / kQKK; ++sb) {
      const float* xb = x + (size_t)r * k + (size_t)sb * kQKK;
      int8_t* q = out.q + (size_t)r * k + (size_t)sb * kQKK;
      float amax = 0.0f, max = 0.0f;
      for (int i = 0; i < kQKK; ++i) {
        const float ax = std::fabs(xb[i]);
        if (ax > amax) {
          amax = ax;
          max = xb[i];
        }
      }
      const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
      for (int i = 0; i < kQKK; ++i) q[i] = (int8_t)std::min(127.0f, std::nearbyintf(iscale * xb[i]));
      out.d[(size_t)r * (k / kQKK) + sb] = amax != 0.0f ? 1.0f / iscale : 0.0f;
      for (int b = 0; b < kQKK / kQK; ++b) {
        int32_t sum = 0;
        for (int i = 0; i < kQK; ++i) sum += q[b * kQK + i];
        out.sum[(size_t)r * (k / kQK) + sb * (kQKK / kQK) + b] = sum;
      }
    }
  }
}

}  // namespace kvt
