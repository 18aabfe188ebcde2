// The scale searches of ggml's k-quant reference quantizers (internal).
// Each returns the group's scale and leaves the chosen quants in L.
#pragma once
#include <cstdint>

namespace kvt {
namespace quant {

// Symmetric, signed quants l ∈ [−nmax, nmax−1], stored as l + nmax. Weighted
// by x² (ggml's rmse_type 1 without an imatrix): starts from d = max/−nmax,
// then tries nmax + 0.1·is for is = −9..9 and keeps the least-squares best.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L);

// Q3_K's group search: d = max/−nmax, then up to 5 passes of per-element
// coordinate descent on the x²-weighted least-squares fit. L: l + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// Asymmetric quants l ∈ [0, nmax] with a min: x ≈ scale·l − the_min. Grid of
// nstep+1 inverse scales (rmin + rdelta·is + nmax)/(max − min), each refit by
// weighted least squares for scale and min; the best by the weighted error
// (|e| when use_mad, else e²) wins. Laux: n bytes of scratch.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

}  // namespace quant
}  // namespace kvt
