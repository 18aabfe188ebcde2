// Reference twin of ops/embed.cc: element by element (block types: row by row).
#include "../kernels.h"
#include "../quant/quant.h"

namespace kvt {

void embed_ref(float* out, const uint8_t* table, int dtype, int rows, int cols, const int32_t* tokens, int n_tok) {
  (void)rows;
  const size_t row_bytes = gguf_row_bytes(dtype, cols);
  for (int t = 0; t < n_tok; ++t) {
    const uint8_t* row = table + (size_t)tokens[t] * row_bytes;
    // block types: the per-type dequantizer is itself the ggml-exact reference
    if (dequantize_blocks(out + (size_t)t * cols, row, dtype, (size_t)cols)) continue;
    for (int c = 0; c < cols; ++c) {
      float v = 0.0f;
      uint16_t h;
      switch (dtype) {
        case F32: std::memcpy(&v, row + (size_t)c * 4, 4); break;
        case F16: std::memcpy(&h, row + (size_t)c * 2, 2); v = f16_to_f32(h); break;
        case BF16: std::memcpy(&h, row + (size_t)c * 2, 2); v = bf16_to_f32(h); break;
        case Q8_0: {
          const uint8_t* blk = row + (size_t)(c / kQ8Block) * kQ8BlockBytes;
          std::memcpy(&h, blk, 2);
          v = f16_to_f32(h) * (float)reinterpret_cast<const int8_t*>(blk + 2)[c % kQ8Block];
          break;
        }
      }
      out[(size_t)t * cols + c] = v;
    }
  }
}

}  // namespace kvt
