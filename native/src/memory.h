// Large host buffers: read-only file mappings and 64-byte-aligned zeroed
// allocations (KV pool, packed weights, activations).
#pragma once
#include <cstddef>
#include <string>

namespace kvt {

struct Mapping {
  void* addr;
  size_t bytes;
};

// Maps a whole file read-only (MAP_PRIVATE). bytes == 0 for an empty file.
bool map_file(const std::string& path, Mapping* out, std::string* why);
void unmap(const Mapping& m);

// Zero-filled, 64-byte aligned (page aligned when large); free with free_aligned.
void* alloc_aligned(size_t bytes);
void free_aligned(void* p, size_t bytes);

}  // namespace kvt
