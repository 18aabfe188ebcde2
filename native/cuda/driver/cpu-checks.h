#pragma once
#include "check-report.h"

namespace kvt_driver {
// Host-only checks of the reference code, the page layout and the GGUF reader:
// these run on any machine (no GPU needed).
void run_cpu_checks(Report& report);
}
