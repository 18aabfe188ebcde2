/*
 * LD_PRELOAD for the llama.cpp reference process on CPUs with AMX (see llamacpp-env.ts):
 * refuses arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), so ggml's AMX set-up fails and
 * llama.cpp evaluates on its AVX-512/AVX2 path. node-llama-cpp 3.21.1's AMX buffer type
 * mis-loads Q8_0 deepseek2/deepseek4 files ("wrong number of tensors; expected 268, got 264")
 * and asserts in the scheduler (GGML_ASSERT(*cur_backend_id != -1)). Every other syscall passes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>

#define ARCH_REQ_XCOMP_PERM 0x1023

long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
  long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_arch_prctl && a1 == ARCH_REQ_XCOMP_PERM) {
    errno = EPERM;
    return -1;
  }
  static long (*real)(long, ...) = 0;
  if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return real(number, a1, a2, a3, a4, a5, a6);
}
