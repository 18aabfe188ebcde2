# kvtier's native compute core.
#
# The kernels in src/ops/*.cc marked "per ISA" are compiled three times, once
# per static library below, each with its own -m flags and its own namespace
# (KVT_ISA_NS); src/dispatch.cc picks one at run time. Everything else is
# compiled once, without ISA flags, so it runs on any x86-64 CPU. On other
# architectures the avx libraries compile as scalar and are never selected.
#
# -ffp-contract=off: the compiler must not fuse a*b+c on its own; kernels
# spell every fma, which is what keeps scalar/AVX2/AVX-512 bit-identical.
#
# native/cuda adds its own conditional section (owned by the CUDA engineer).
{
  # CUDA addon target (kvtier_cuda), present only where nvcc is found: see cuda/kvtier-cuda.gypi.
  "includes": ["cuda/kvtier-cuda.gypi"],
  "variables": {
    "kvt_common_cflags": ["-std=c++17", "-O3", "-fPIC", "-ffp-contract=off", "-fno-math-errno", "-Wall", "-Wno-unused-function"],
    "kvt_isa_sources": [
      "src/ops/matmul.cc",
      "src/ops/matmul-legacy.cc",
      "src/ops/matmul-kquant.cc",
      "src/ops/rmsnorm.cc",
      "src/ops/softmax.cc",
      "src/ops/swiglu.cc",
      "src/ops/add.cc",
      "src/ops/attention.cc",
      "src/ops/mla-attention.cc",
      "src/ops/table.cc",
      "src/ops/kv-codec.cc",
      "src/ops/sample-masked.cc"
    ]
  },
  "target_defaults": {
    "cflags_cc": ["<@(kvt_common_cflags)"],
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-O2", "-O0"],
    "cflags!": ["-O2"],
    "conditions": [["target_arch=='x64'", {"defines": ["KVT_HAVE_X86"]}]]
  },
  "targets": [
    {
      "target_name": "kvt_isa_scalar",
      "type": "static_library",
      "sources": ["<@(kvt_isa_sources)"],
      "defines": ["KVT_ISA_NS=isa_scalar", "KVT_ISA_TABLE=kernels_scalar", "KVT_ISA_LABEL=\"scalar\""]
    },
    {
      "target_name": "kvt_isa_avx2",
      "type": "static_library",
      "sources": ["<@(kvt_isa_sources)"],
      "defines": ["KVT_ISA_NS=isa_avx2", "KVT_ISA_TABLE=kernels_avx2", "KVT_ISA_LABEL=\"avx2\""],
      "conditions": [["target_arch=='x64'", {"cflags_cc": ["-mavx2", "-mfma", "-mf16c"]}]]
    },
    {
      "target_name": "kvt_isa_avx512",
      "type": "static_library",
      "sources": ["<@(kvt_isa_sources)"],
      "defines": ["KVT_ISA_NS=isa_avx512", "KVT_ISA_TABLE=kernels_avx512", "KVT_ISA_LABEL=\"avx512\""],
      "conditions": [["target_arch=='x64'", {
        "cflags_cc": ["-mavx2", "-mfma", "-mf16c", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni",
                      "-Wno-maybe-uninitialized", "-Wno-uninitialized"]
      }]]
    },
    {
      "target_name": "kvtier_native",
      "dependencies": ["kvt_isa_scalar", "kvt_isa_avx2", "kvt_isa_avx512"],
      "sources": [
        "src/addon.cc",
        "src/napi-args.cc",
        "src/memory-napi.cc",
        "src/weights-napi.cc",
        "src/elementwise-napi.cc",
        "src/attention-napi.cc",
        "src/dispatch.cc",
        "src/thread-pool.cc",
        "src/memory.cc",
        "src/ops/matmul-pack.cc",
        "src/ops/matmul-ref.cc",
        "src/ops/matmul-legacy-pack.cc",
        "src/ops/matmul-legacy-ref.cc",
        "src/ops/matmul-kquant-pack.cc",
        "src/ops/matmul-kquant-ref.cc",
        "src/ops/rmsnorm-ref.cc",
        "src/ops/softmax-ref.cc",
        "src/ops/swiglu-ref.cc",
        "src/ops/add-ref.cc",
        "src/ops/attention-ref.cc",
        "src/ops/rope.cc",
        "src/ops/rope-ref.cc",
        "src/ops/embed.cc",
        "src/ops/embed-ref.cc",
        "src/ops/kv-write.cc",
        "src/ops/kv-write-ref.cc",
        "src/ops/mla-dispatch.cc",
        "src/ops/mla-attention-ref.cc",
        "src/ops/kv-codec-dispatch.cc",
        "src/ops/kv-codec-encode.cc",
        "src/ops/kv-codec-ref.cc",
        "src/kv-codec-napi.cc",
        "src/ops/sample-masked-select.cc",
        "src/ops/sample-masked-ref.cc",
        "src/sample-napi.cc",
        "src/xxh64-napi.cc",
        "src/aes-gcm-napi.cc",
        "src/aes-gcm-vaes.cc",
        "src/aes-gcm-read-napi.cc",
        "src/fs-batch-napi.cc",
        "src/ops/window-attention.cc",
        "src/ops/window-attention-ref.cc",
        "src/window-ops-napi.cc",
        "src/ops/dsv4-sparse-attention.cc",
        "src/ops/dsv4-sparse-attention-ref.cc",
        "src/ops/act-roundtrip.cc",
        "src/ops/dsv4-hc.cc",
        "src/ops/dsv4-indexer.cc",
        "src/ops/dsv4-indexer-ref.cc",
        "src/dsv4-napi.cc",
        "src/ops/dsv4-rmsnorm.cc",
        "src/ops/dsv4-rmsnorm-ref.cc",
        "src/ops/dsv4-hc-weights.cc",
        "src/ops/dsv4-hc-weights-ref.cc",
        "src/ops/dsv4-swiglu.cc",
        "src/ops/dsv4-swiglu-ref.cc",
        "src/ops/dsv4-moe-combine.cc",
        "src/ops/dsv4-moe-combine-ref.cc",
        "src/dsv4-rows-napi.cc",
        "src/quant/quant-dispatch.cc",
        "src/quant/quant-search.cc",
        "src/quant/quant-legacy.cc",
        "src/quant/quant-iq4.cc",
        "src/quant/quant-q2k.cc",
        "src/quant/quant-q3k.cc",
        "src/quant/quant-q4k-q5k.cc",
        "src/quant/quant-q6k.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS"],
      "libraries": ["-lpthread"]
    }
  ]
}
