"""Legacy / IQ4 quantized rows from ggml itself (libggml-base.so shipped with node-llama-cpp).

usage: python3 ggml-legacy-quant.py LIBGGML_BASE TYPE INPUT_F32_FILE > output
TYPE: q4_0 | q4_1 | q5_0 | q5_1 | iq4_nl | iq4_xs
output: quantize_row_<TYPE>_ref bytes, then dequantize_row_<TYPE> of them (f32)
"""
import ctypes
import sys

BLOCK = {"q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "iq4_nl": (32, 18), "iq4_xs": (256, 136)}

lib = ctypes.CDLL(sys.argv[1])
kind = sys.argv[2]
qk, size = BLOCK[kind]
src = open(sys.argv[3], "rb").read()
n = len(src) // 4
if n % qk:
    sys.exit(f"{kind} needs a multiple of {qk} values, got {n}")
buf = (ctypes.c_char * len(src)).from_buffer_copy(src)
q = ctypes.create_string_buffer(n // qk * size)
getattr(lib, f"quantize_row_{kind}_ref")(buf, q, ctypes.c_int64(n))
deq = ctypes.create_string_buffer(n * 4)
getattr(lib, f"dequantize_row_{kind}")(q, deq, ctypes.c_int64(n))
sys.stdout.buffer.write(q.raw + deq.raw)
