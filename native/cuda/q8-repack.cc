#include "q8-repack.h"

#include <cstring>

namespace kvt_cuda {

void q8_0_repack(int8_t* qs, uint16_t* scales, const kvt_block_q8_0* blocks, int rows, int cols) {
  const size_t n_blocks = (size_t)rows * cols / 32;
  for (size_t b = 0; b < n_blocks; ++b) {
    kvt_block_q8_0 blk;
    std::memcpy(&blk, blocks + b, sizeof blk);  // source blocks are only 2-byte aligned
    scales[b] = blk.d_bits;
    std::memcpy(qs + b * 32, blk.qs, 32);
  }
}

}  // namespace kvt_cuda
