#pragma once
#include <string>

#include "../ref/llama-ref.h"

namespace kvt_driver {
// Writes `m` as a GGUF v3 llama file (used to test the reader).
void write_gguf_llama(const std::string& path, const kvt_ref::HostLlama& m);
}
