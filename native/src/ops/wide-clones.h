// KVT_WIDE_CLONES: for a kernel outside the per-ISA sources (compiled without
// ISA flags) that only gains wider lanes from AVX2/AVX-512: GCC clones it per
// target and picks one at load. Its arithmetic is unchanged (no reassociation;
// -ffp-contract=off forbids fusing), so every clone gives the same bits.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KVT_WIDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KVT_WIDE_CLONES
#endif
