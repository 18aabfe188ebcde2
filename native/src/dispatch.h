// Run-time ISA selection of the kernel table.
#pragma once
#include <string>
#include <vector>

#include "kernels.h"

namespace kvt {

const Kernels& active_kernels();
// ISAs this build and CPU can run, best last ("scalar", "avx2", "avx512").
std::vector<std::string> available_isas();
// false (and *why) when the name is unknown or the CPU/build cannot run it.
bool set_isa(const std::string& name, std::string* why);

}  // namespace kvt
