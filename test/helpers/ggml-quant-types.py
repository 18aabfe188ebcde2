"""ggml's own quantizers and dequantizers of the GGUF block types, for
test/native/quant-ggml.test.ts (libggml-base.so shipped with node-llama-cpp).

usage: python3 ggml-quant-types.py LIBGGML_BASE DIR TYPE...
  reads  DIR/in.f32 (k float32 values, k % 256 == 0) and DIR/ours-TYPE.bin
         (kvtier's quantized bytes of the same values)
  writes DIR/ggml-TYPE.bin: ggml's quantization of in.f32
         (quantize_row_TYPE_ref; iq4_nl / iq4_xs: quantize_iq4_nl / _xs
         without an imatrix, as llama-quantize runs them)
         DIR/deq-TYPE.f32: ggml's dequantize_row_TYPE of ours-TYPE.bin
"""
import ctypes
import os
import sys

lib = ctypes.CDLL(sys.argv[1])
work = sys.argv[2]
src = open(os.path.join(work, "in.f32"), "rb").read()
k = len(src) // 4
x = (ctypes.c_char * len(src)).from_buffer_copy(src)

BLOCK = {  # values per block, bytes per block
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "iq4_nl": (32, 18),
    "q2_K": (256, 84), "q3_K": (256, 110), "q4_K": (256, 144), "q5_K": (256, 176), "q6_K": (256, 210),
    "iq4_xs": (256, 136),
}

for t in sys.argv[3:]:
    qk, nbytes = BLOCK[t]
    out = ctypes.create_string_buffer(k // qk * nbytes)
    if t.startswith("iq4"):
        fn = getattr(lib, "quantize_" + t)
        fn.restype = ctypes.c_size_t
        fn(x, out, ctypes.c_int64(1), ctypes.c_int64(k), None)
    else:
        getattr(lib, "quantize_row_" + t + "_ref")(x, out, ctypes.c_int64(k))
    open(os.path.join(work, "ggml-" + t + ".bin"), "wb").write(out.raw)
    ours = open(os.path.join(work, "ours-" + t + ".bin"), "rb").read()
    q = (ctypes.c_char * len(ours)).from_buffer_copy(ours)
    deq = ctypes.create_string_buffer(k * 4)
    getattr(lib, "dequantize_row_" + t)(q, deq, ctypes.c_int64(k))
    open(os.path.join(work, "deq-" + t + ".f32"), "wb").write(deq.raw)
