#!/bin/sh
# cached-compile.sh OBJ SRC HEADER... -- COMPILER ARG...
#
# Runs the compile command unless an object built from the same inputs is in
# the object cache, which lives outside the checkout so that a clean clone, the
# install step (npm ci) and test/native/cuda.test.ts share it. make decides by
# mtime, and a fresh checkout is newer than any object, so without this every
# clone recompiled all the kernels (~160 s of nvcc on two cores) though no
# source had changed.
#
# The key is what make's own rule treats as an input, by content: the source,
# every header the Makefile lists (all of them, as make does), the whole
# command line (flags, arch, output name), the compiler's and the host g++'s
# --version and NVCC_PREPEND_FLAGS/NVCC_APPEND_FLAGS. Not in the key: the
# checkout's path (only the device line info names it) and the CUDA toolkit's
# own headers beyond its version.
#   KVTIER_CUDA_OBJ_CACHE  the cache directory; "off" (or empty) compiles always.
set -eu

obj=$1
src=$2
shift 2
headers=''
while [ "$#" -gt 0 ] && [ "$1" != '--' ]; do
  headers="$headers $1"
  shift
done
[ "$#" -gt 0 ] && shift # --

dir=${KVTIER_CUDA_OBJ_CACHE-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/kvtier/cuda-objects}
if [ -z "$dir" ] || [ "$dir" = off ]; then
  exec "$@"
fi

key=$(
  {
    printf 'cmd %s\n' "$*"
    "$1" --version
    g++ --version
    printf 'env %s|%s\n' "${NVCC_PREPEND_FLAGS-}" "${NVCC_APPEND_FLAGS-}"
    for f in $src $(printf '%s\n' $headers | LC_ALL=C sort); do
      printf 'file %s\n' "$f"
      cat "$f"
    done
  } | sha256sum | cut -c1-40
)
hit="$dir/$key.o"

if [ -f "$hit" ]; then
  cp "$hit" "$obj.tmp.$$"
  mv -f "$obj.tmp.$$" "$obj"
  touch "$hit" # recently used: kept by the prune below
  exit 0
fi

"$@"
mkdir -p "$dir"
# Another make (a second clone, -j) may store the same key: write, then rename.
cp "$obj" "$hit.tmp.$$"
mv -f "$hit.tmp.$$" "$hit"
find "$dir" -name '*.o' -type f -mtime +30 -delete 2>/dev/null || true
