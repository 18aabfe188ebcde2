#include "ref.h"

namespace kvt_ref {

// out[T,d] = table[tokens[t]]
void embed(float* out, const HostWeight& table, const int32_t* tokens, int t) {
  for (int r = 0; r < t; ++r)
    for (int j = 0; j < table.cols; ++j) out[(size_t)r * table.cols + j] = table.at(tokens[r], j);
}

}  // namespace kvt_ref
