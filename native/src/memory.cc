#include "memory.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvt {

// Above this, anonymous mmap: zero pages for free, lazily committed, returned
// to the OS on free (a KV pool can be GBs).
constexpr size_t kMmapThreshold = 1 << 20;

bool map_file(const std::string& path, Mapping* out, std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *why = "cannot stat '" + path + "': " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  out->bytes = (size_t)st.st_size;
  out->addr = nullptr;
  if (out->bytes > 0) {
    void* p = ::mmap(nullptr, out->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      *why = "cannot mmap '" + path + "': " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    out->addr = p;
  }
  ::close(fd);
  return true;
}

void unmap(const Mapping& m) {
  if (m.addr && m.bytes) ::munmap(m.addr, m.bytes);
}

void* alloc_aligned(size_t bytes) {
  if (bytes == 0) bytes = 64;
  if (bytes >= kMmapThreshold) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
  }
  void* p = nullptr;
  size_t rounded = (bytes + 63) / 64 * 64;
  if (::posix_memalign(&p, 64, rounded) != 0) return nullptr;
  std::memset(p, 0, rounded);
  return p;
}

void free_aligned(void* p, size_t bytes) {
  if (!p) return;
  if (bytes == 0) bytes = 64;
  if (bytes >= kMmapThreshold) ::munmap(p, bytes);
  else std::free(p);
}

}  // namespace kvt
