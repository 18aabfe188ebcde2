"""Reference conversions from ggml itself (libggml-base.so shipped with node-llama-cpp).

usage: python3 ggml-quantize.py LIBGGML_BASE INPUT_F32_FILE > output
output: quantize_row_q8_0_ref bytes, then ggml_fp32_to_fp16_row, then ggml_fp32_to_bf16_row_ref
"""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
src = open(sys.argv[2], "rb").read()
n = len(src) // 4
buf = (ctypes.c_char * len(src)).from_buffer_copy(src)
q8 = ctypes.create_string_buffer(n // 32 * 34)
lib.quantize_row_q8_0_ref(buf, q8, ctypes.c_int64(n))
f16 = ctypes.create_string_buffer(n * 2)
lib.ggml_fp32_to_fp16_row(buf, f16, ctypes.c_int64(n))
bf16 = ctypes.create_string_buffer(n * 2)
lib.ggml_fp32_to_bf16_row_ref(buf, bf16, ctypes.c_int64(n))
sys.stdout.buffer.write(q8.raw + f16.raw + bf16.raw)
