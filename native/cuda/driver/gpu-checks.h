#pragma once
#include <string>

#include "../cuda-backend.h"
#include "check-report.h"

namespace kvt_driver {
// Every kernel against its CPU twin, the llama forward against the reference
// forward, and cache equivalence through the import/export streams.
void run_gpu_checks(Report& report, kvt_cuda_ctx* ctx, const std::string& gguf_path);
}
