// Per-type quantizers and dequantizers of the GGUF weight types, each
// byte-identical (quantize) and bit-identical (dequantize) to ggml:
//   quantize_row_<t>   = ggml's quantize_row_<t>_ref (IQ4_NL / IQ4_XS: ggml's
//                        quantize_iq4_nl / quantize_iq4_xs without an imatrix,
//                        which is what llama-quantize runs without one)
//   dequantize_row_<t> = ggml's dequantize_row_<t>
// x / y: k values, k a multiple of the type's block (32 or 256); the byte side
// is k / QK blocks in the layouts of blocks.h, read and written with memcpy
// (no alignment needed). Compiled once, without ISA flags and with
// -ffp-contract=off: every float operation happens in the order written, as
// in ggml's plain C.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvt {

#define KVT_QUANT_TYPE(t)                                            \
  void quantize_row_##t(const float* x, uint8_t* y, int64_t k);     \
  void dequantize_row_##t(const uint8_t* x, float* y, int64_t k);

KVT_QUANT_TYPE(q4_0)
KVT_QUANT_TYPE(q4_1)
KVT_QUANT_TYPE(q5_0)
KVT_QUANT_TYPE(q5_1)
KVT_QUANT_TYPE(iq4_nl)
KVT_QUANT_TYPE(q2_K)
KVT_QUANT_TYPE(q3_K)
KVT_QUANT_TYPE(q4_K)
KVT_QUANT_TYPE(q5_K)
KVT_QUANT_TYPE(q6_K)
KVT_QUANT_TYPE(iq4_xs)
#undef KVT_QUANT_TYPE

// Dispatch by GGML type id over the types above. Return false for a type that
// has no quantizer here (F32/F16/BF16/Q8_0 are handled by kvt::quantize itself).
bool quantize_blocks(uint8_t* dst, const float* src, int dtype, size_t count);
bool dequantize_blocks(float* dst, const uint8_t* src, int dtype, size_t count);
// True for the types quantize_blocks / dequantize_blocks handle.
bool has_block_quantizer(int dtype);

}  // namespace kvt
