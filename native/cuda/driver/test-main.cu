// kvtier_cuda_test — the CUDA backend's standalone test driver (no Node.js).
//
//   kvtier_cuda_test [--cpu-only] [--gguf model.gguf] [--device N]
//
// Runs the host-only checks (reference code, page layout, GGUF reader), then,
// when a CUDA device is present, every kernel against its CPU twin, the llama
// forward against the reference forward and the cache-equivalence checks.
// stdout: one JSON object. Exit: 0 all passed, 1 a check failed, 2 usage,
// 77 no CUDA device (host checks passed; the reason is in the JSON).
#include <cstdio>
#include <cstring>
#include <string>

#include "../cuda-backend.h"
#include "cpu-checks.h"
#include "gpu-checks.h"

int main(int argc, char** argv) {
  bool cpu_only = false;
  std::string gguf;
  int device = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cpu-only") cpu_only = true;
    else if (a == "--gguf" && i + 1 < argc) gguf = argv[++i];
    else if (a == "--device" && i + 1 < argc) device = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--cpu-only] [--gguf model.gguf] [--device N]\n", argv[0]);
      return 2;
    }
  }
  kvt_driver::Report report;
  kvt_driver::run_cpu_checks(report);
  if (cpu_only) {
    report.print_json(stdout, ",\"gpu\":\"not requested\"");
    return report.failed() ? 1 : 0;
  }
  char reason[256] = {0};
  if (kvt_cuda_device_count(reason, sizeof reason) == 0) {
    std::fprintf(stderr, "SKIP gpu checks: %s\n", reason);
    report.print_json(stdout, std::string(",\"gpu\":\"skipped\",\"skip_reason\":\"") +
                                  kvt_driver::Report::esc(reason) + "\"");
    return report.failed() ? 1 : 77;
  }
  kvt_cuda_ctx* ctx = nullptr;
  char err[256] = {0};
  if (kvt_cuda_create(device, &ctx, err, sizeof err) != KVT_CUDA_OK) {
    report.expect_true("gpu/create context", false, err);
    report.print_json(stdout, ",\"gpu\":\"failed\"");
    return 1;
  }
  char name[128];
  int sms = 0, cc = 0;
  size_t mem = 0;
  kvt_cuda_device_info(ctx, name, sizeof name, &sms, &mem, &cc);
  std::fprintf(stderr, "device %d: %s sm_%d, %d SMs, %zu MiB\n", device, name, cc, sms, mem >> 20);
  kvt_driver::run_gpu_checks(report, ctx, gguf);
  kvt_cuda_destroy(ctx);
  report.print_json(stdout, std::string(",\"gpu\":\"") + kvt_driver::Report::esc(name) + "\",\"cc\":" +
                                std::to_string(cc));
  return report.failed() ? 1 : 0;
}
