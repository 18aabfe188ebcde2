#!/bin/sh
# Prints the directory holding libcudart_static.a of the nvcc given as $1
# (nvcc may be a wrapper script, so ask nvcc itself where its tree is).
top=$("$1" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
for d in "$top/targets/x86_64-linux/lib" "$top/targets/sbsa-linux/lib" "$top/lib64" "$top/lib"; do
  if [ -f "$d/libcudart_static.a" ]; then echo "$d"; exit 0; fi
done
echo "/usr/local/cuda/lib64"
