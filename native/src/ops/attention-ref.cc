// Reference twin of ops/attention.cc: the same math, one (row, head) at a
// time, plain loops, single thread (window-attention-ref.cc). Shapes as in attention.cc.
#include "../kernels.h"
#include "window-attention.h"

namespace kvt {

// Full causal attention is the window twin with no window (window 0 keeps
// every earlier key), so one plain loop nest serves both references.
void attention_ref(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
                   float scale, const AttnSegment* segs, int n_segs) {
  window_attention_ref(out, q, pages, kv, layer, n_heads, scale, 0, segs, n_segs);
}

}  // namespace kvt
