"""ggml's own K-quant conversions (libggml-base.so shipped with node-llama-cpp), for the tests.

usage: python3 ggml-kquant.py LIBGGML_BASE TYPE INPUT_F32_FILE > output
TYPE: q2_K, q3_K, q4_K, q5_K or q6_K; the input holds a multiple of 256 floats.
output: quantize_row_<TYPE>_ref bytes, then dequantize_row_<TYPE> of them (f32)
"""
import ctypes
import sys

BLOCK_BYTES = {"q2_K": 84, "q3_K": 110, "q4_K": 144, "q5_K": 176, "q6_K": 210}

lib = ctypes.CDLL(sys.argv[1])
t = sys.argv[2]
src = open(sys.argv[3], "rb").read()
n = len(src) // 4
buf = (ctypes.c_char * len(src)).from_buffer_copy(src)
q = ctypes.create_string_buffer(n // 256 * BLOCK_BYTES[t])
getattr(lib, "quantize_row_%s_ref" % t)(buf, q, ctypes.c_int64(n))
y = ctypes.create_string_buffer(n * 4)
getattr(lib, "dequantize_row_%s" % t)(q, y, ctypes.c_int64(n))
sys.stdout.buffer.write(q.raw + y.raw)
