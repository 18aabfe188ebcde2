// The GEMM work split of the packed dense and K-quant matmuls: the
// 16-row weight panels in groups of up to np_max, the groups spread over the
// pool. A group decodes or widens its panels once and reuses them for every
// row tile of x, so a group is the unit of work.
#pragma once
#include <algorithm>
#include <cstddef>

#include "../common.h"
#include "../thread-pool.h"

namespace kvt {

// group(p, np, cols): first panel p, np panels, and their output columns that
// exist (the last panel of the weight may be partial: n_cols is its row count).
template <typename Group>
inline void for_each_panel_group(ThreadPool& pool, size_t n_panels, int np_max, int n_cols, Group group) {
  const size_t n_groups = (n_panels + np_max - 1) / np_max;
  parallel_for(pool, n_groups, [&](size_t gb, size_t ge) {
    for (size_t g = gb; g < ge; ++g) {
      const size_t p = g * np_max;
      const int np = (int)std::min<size_t>(np_max, n_panels - p);
      group(p, np, std::min<int>(np * kPanel, n_cols - (int)(p * kPanel)));
    }
  });
}

}  // namespace kvt
