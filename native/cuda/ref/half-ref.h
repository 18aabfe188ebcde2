// IEEE binary16 and bfloat16 conversions in plain C++ (round to nearest even),
// matching __float2half_rn / __float2bfloat16_rn bit for bit on finite values.
#pragma once
#include <cstdint>
#include <cstring>

namespace kvt_ref {

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_f32(sign);
    int e = -1;  // subnormal: normalise
    do { mant <<= 1; ++e; } while (!(mant & 0x400));
    return bits_f32(sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13));
  }
  return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00 : 0x7c00);
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds to ≥ 65520 → inf
  if (abs < 0x38800000u) {                        // result subnormal or zero
    if (abs < 0x33000000u) return sign;           // < 2^-25 rounds to 0
    const uint32_t exp = abs >> 23, mant = (abs & 0x7fffff) | 0x800000;
    // value = mant * 2^(exp-150); in half subnormal units (2^-24): mant >> (126-exp)
    const int rshift = 126 - (int)exp;
    uint32_t r = mant >> rshift;
    const uint32_t rem = mant & ((1u << rshift) - 1), halfway = 1u << (rshift - 1);
    if (rem > halfway || (rem == halfway && (r & 1))) ++r;
    return sign | (uint16_t)r;
  }
  uint32_t r = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return sign | (uint16_t)r;
}

inline float bf16_to_float(uint16_t b) { return bits_f32((uint32_t)b << 16); }
inline uint16_t float_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

inline float round_half(float f) { return half_to_float(float_to_half(f)); }
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

}  // namespace kvt_ref
