#!/usr/bin/env bash
# One prepared run of the CUDA backend's checks on a GPU machine (no Node.js
# needed): build for the local GPU's arch, run the test driver, then the
# bench, and print one JSON object on stdout. Logs go to $OUT (if set) or
# build/gpu/. Well inside 10 minutes on an H100/H200: ~1 min build, ~1 min
# tests, ~1-2 min bench.
#
#   native/cuda/run-gpu-checks.sh [model.gguf]
set -uo pipefail
cd "$(dirname "$0")"
GGUF="${1:-}"
BUILD=build/gpu
LOGS="${OUT:-$BUILD}"
mkdir -p "$BUILD" "$LOGS"
export PATH="$PATH:/usr/local/cuda/bin"

smi="$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
[[ "$cc" =~ ^[0-9]+$ ]] || cc=90
arch="-gencode arch=compute_${cc},code=sm_${cc}"

t0=$(date +%s)
make -j"$(nproc)" BUILD="$BUILD" ARCH="$arch" >"$LOGS/build.log" 2>&1
build_rc=$?
t1=$(date +%s)

test_rc=-1; bench_rc=-1
echo '{}' >"$LOGS/test.json"; echo '{}' >"$LOGS/bench.json"
if [ $build_rc -eq 0 ]; then
  args=()
  [ -n "$GGUF" ] && args=(--gguf "$GGUF")
  timeout 300 "$BUILD/kvtier_cuda_test" "${args[@]}" >"$LOGS/test.json" 2>"$LOGS/test.log"
  test_rc=$?
  timeout 240 "$BUILD/kvtier_cuda_bench" >"$LOGS/bench.json" 2>"$LOGS/bench.log"
  bench_rc=$?
fi
t2=$(date +%s)

python3 - "$LOGS" "$build_rc" "$test_rc" "$bench_rc" "$smi" "$arch" "$((t1 - t0))" "$((t2 - t1))" <<'PY'
import json, sys
logs, build_rc, test_rc, bench_rc, smi, arch, build_s, run_s = sys.argv[1:]
def load(name):
    try:
        text = open(f"{logs}/{name}").read().strip().splitlines()
        return json.loads(text[-1]) if text else None
    except Exception as e:  # a crashed driver leaves partial output: say so
        return {"unparsed": str(e)}
def tail(name, n=40):
    try:
        return open(f"{logs}/{name}").read().splitlines()[-n:]
    except Exception:
        return []
test = load("test.json")
out = {
    "gpu": smi, "arch": arch, "build_rc": int(build_rc), "build_s": int(build_s),
    "test_rc": int(test_rc), "bench_rc": int(bench_rc), "run_s": int(run_s),
    "test_summary": {k: test.get(k) for k in ("passed", "failed", "gpu")} if isinstance(test, dict) else None,
    "failed_checks": [c for c in (test or {}).get("checks", []) if not c.get("ok")] if isinstance(test, dict) else None,
    "bench": load("bench.json"),
}
if int(build_rc) != 0:
    out["build_log_tail"] = tail("build.log")
if int(test_rc) not in (0,):
    out["test_log_tail"] = tail("test.log")
if int(bench_rc) not in (0,):
    out["bench_log_tail"] = tail("bench.log")
print(json.dumps(out, indent=1))
PY
[ $build_rc -eq 0 ] && [ $test_rc -eq 0 ] && [ $bench_rc -eq 0 ]
