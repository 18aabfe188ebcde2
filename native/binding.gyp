{
  "targets": [
    {
      "target_name": "kvtier_native",
      "sources": ["src/addon.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-O3"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"]
    }
  ]
}
