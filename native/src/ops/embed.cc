// Embedding gather (ISA-independent, memory-bound).
//   out [n_tok][cols] = dequantize(table row tokens[t]),  table [rows][cols] GGUF layout
#include "../kernels.h"

namespace kvt {

void embed(float* out, const uint8_t* table, int dtype, int rows, int cols, const int32_t* tokens, int n_tok,
           ThreadPool& pool) {
  (void)rows;  // token ids are range-checked by the binding
  const size_t row_bytes = gguf_row_bytes(dtype, cols);
  parallel_for(pool, (size_t)n_tok, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t)
      dequantize(out + t * cols, table + (size_t)tokens[t] * row_bytes, dtype, (size_t)cols);
  }, 16);
}

}  // namespace kvt
