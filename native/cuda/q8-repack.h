// Q8_0 upload layout: ggml's packed 34-byte blocks → two aligned planes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kvt-cuda-types.h"

namespace kvt_cuda {
// blocks: rows*cols/32 kvt_block_q8_0 (row-major) → qs int8 [rows][cols],
// scales f16 bits [rows][cols/32].
void q8_0_repack(int8_t* qs, uint16_t* scales, const kvt_block_q8_0* blocks, int rows, int cols);
}
