// Dispatch of the block quantizers by GGML type id (kvt::quantize /
// kvt::dequantize call these for every type past F32/F16/BF16/Q8_0).
#include "../common.h"
#include "quant.h"

namespace kvt {

namespace {

struct QuantFns {
  void (*quantize)(const float*, uint8_t*, int64_t);
  void (*dequantize)(const uint8_t*, float*, int64_t);
};

QuantFns fns_of(int dtype) {
  switch (dtype) {
    case Q4_0: return {quantize_row_q4_0, dequantize_row_q4_0};
    case Q4_1: return {quantize_row_q4_1, dequantize_row_q4_1};
    case Q5_0: return {quantize_row_q5_0, dequantize_row_q5_0};
    case Q5_1: return {quantize_row_q5_1, dequantize_row_q5_1};
    case IQ4_NL: return {quantize_row_iq4_nl, dequantize_row_iq4_nl};
    case Q2_K: return {quantize_row_q2_K, dequantize_row_q2_K};
    case Q3_K: return {quantize_row_q3_K, dequantize_row_q3_K};
    case Q4_K: return {quantize_row_q4_K, dequantize_row_q4_K};
    case Q5_K: return {quantize_row_q5_K, dequantize_row_q5_K};
    case Q6_K: return {quantize_row_q6_K, dequantize_row_q6_K};
    case IQ4_XS: return {quantize_row_iq4_xs, dequantize_row_iq4_xs};
    default: return {nullptr, nullptr};
  }
}

}  // namespace

bool has_block_quantizer(int dtype) { return fns_of(dtype).quantize != nullptr; }

bool quantize_blocks(uint8_t* dst, const float* src, int dtype, size_t count) {
  QuantFns f = fns_of(dtype);
  if (!f.quantize) return false;
  f.quantize(src, dst, (int64_t)count);
  return true;
}

bool dequantize_blocks(float* dst, const uint8_t* src, int dtype, size_t count) {
  QuantFns f = fns_of(dtype);
  if (!f.dequantize) return false;
  f.dequantize(src, dst, (int64_t)count);
  return true;
}

}  // namespace kvt
