"""llama.cpp's own llama-quantize (llama_model_quantize of the libllama that
node-llama-cpp ships), for checking synthetic quantized models against it.

usage: python3 llamacpp-quantize.py BINS_DIR IN.gguf OUT.gguf FTYPE
  FTYPE: llama_ftype number (2 Q4_0, 7 Q8_0, 15 Q4_K_M, 17 Q5_K_M, 18 Q6_K)
No imatrix, no overrides, one thread: what `llama-quantize IN OUT TYPE` does.
The params struct mirrors include/llama.h of the shipped llama.cpp (read from
node_modules/node-llama-cpp/llama/gitRelease.bundle).
"""
import ctypes
import os
import sys

bins, src, dst, ftype = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for dep in ["libggml-base.so", "libggml.v0.4.0.so"]:
    ctypes.CDLL(os.path.join(bins, dep), mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(os.path.join(bins, "libllama.v0.4.0.so"))


class QuantizeParams(ctypes.Structure):
    _fields_ = [
        ("nthread", ctypes.c_int32),
        ("ftype", ctypes.c_int),
        ("output_tensor_type", ctypes.c_int),
        ("token_embedding_type", ctypes.c_int),
        ("allow_requantize", ctypes.c_bool),
        ("quantize_output_tensor", ctypes.c_bool),
        ("only_copy", ctypes.c_bool),
        ("pure", ctypes.c_bool),
        ("keep_split", ctypes.c_bool),
        ("dry_run", ctypes.c_bool),
        ("imatrix", ctypes.c_void_p),
        ("kv_overrides", ctypes.c_void_p),
        ("tt_overrides", ctypes.c_void_p),
        ("prune_layers", ctypes.c_void_p),
        ("max_buf_size", ctypes.c_size_t),
    ]


lib.llama_model_quantize_default_params.restype = QuantizeParams
lib.llama_model_quantize.restype = ctypes.c_uint32
lib.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(QuantizeParams)]
params = lib.llama_model_quantize_default_params()
params.nthread = 1
params.ftype = ftype
rc = lib.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
sys.exit(rc)
