// The CUDA backend's standalone build and test driver (native/cuda).
//
// Here (nvcc, no GPU): builds every kernel and the drivers, runs the host-side
// checks, and checks that the driver reports why it skips its GPU part. On a
// GPU machine the same file runs the GPU checks.
//
// It builds in the directory `npm install` already fills (build/napi: the
// kernels and the runtime, for the addon) with the same nvcc, arch and flags,
// so make finds those objects up to date and compiles only what is stale plus
// the reference twins and the drivers. Every kernel is still compiled from its
// current source (make rebuilds an object whose source, a header, the arch or
// the flags changed), once per install instead of once more per test run: from
// an empty build dir this file spent ~300 s in nvcc under CI load, most of it
// nvcc's fixed cost per translation unit (cudafe++ and the host compile of the
// CUDA headers, ~3 s a file), not ptxas.
// A fresh clone is newer than any object, so make alone recompiled everything
// in each clone (162 s of this file in a clean-clone run, bench/RESULTS.md
// "suite time"); native/cuda/cached-compile.sh takes an object from a cache
// outside the checkout when the same source, headers, command line and nvcc
// built it before, and compiles otherwise.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cudaDir = path.join(root, 'native/cuda');
// The same BUILD and ARCH as native/cuda/kvtier-cuda.gypi (KVTIER_CUDA_ARCH
// overrides both): another value would make a second full build.
const testBuild = 'build/napi';
const testArch =
  process.env.KVTIER_CUDA_ARCH || '-gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80';

function findNvcc(): string | null {
  const probe = spawnSync('sh', ['-c', 'command -v nvcc || ls /usr/local/cuda/bin/nvcc'], {
    encoding: 'utf8',
  });
  const found = probe.stdout.trim().split('\n')[0];
  return probe.status === 0 && found ? found : null;
}

function gpuPresent(): { ok: boolean; reason: string } {
  const smi = spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8' });
  if (smi.error) return { ok: false, reason: 'nvidia-smi not found (no NVIDIA driver on this machine)' };
  if (smi.status !== 0 || !/GPU \d+/.test(smi.stdout)) {
    return { ok: false, reason: `nvidia-smi lists no GPU: ${(smi.stderr || smi.stdout).trim()}` };
  }
  return { ok: true, reason: '' };
}

const nvcc = findNvcc();
const gpu = gpuPresent();
const nvccSkip = nvcc ? '' : ' [skipped: nvcc not found on PATH or in /usr/local/cuda/bin]';
const gpuSkip = gpu.ok ? '' : ` [skipped: ${gpu.reason}]`;
const driver = path.join(cudaDir, testBuild, 'kvtier_cuda_test');
const bench = path.join(cudaDir, testBuild, 'kvtier_cuda_bench');

interface DriverReport {
  passed: number;
  failed: number;
  gpu: string;
  skip_reason?: string;
  checks: { name: string; ok: boolean; err: number; tol: number; detail: string }[];
}

function runDriver(args: string[]): { status: number | null; report: DriverReport; stderr: string } {
  const r = spawnSync(driver, args, { encoding: 'utf8', timeout: 600_000 });
  const line = r.stdout.trim().split('\n').pop() ?? '';
  return { status: r.status, report: JSON.parse(line) as DriverReport, stderr: r.stderr };
}

describe('native/cuda standalone driver', () => {
  it.skipIf(!nvcc)(`builds every kernel, the runtime and both drivers with nvcc (or its cached object for the same inputs)${nvccSkip}`, () => {
    const env = { ...process.env, PATH: `${path.dirname(nvcc ?? '')}:${process.env.PATH}` };
    // NVCC as the gypi passes it (its path): it is part of the flags stamp.
    execFileSync('make', ['-C', cudaDir, '-j2', `NVCC=${nvcc}`, `BUILD=${testBuild}`, `ARCH=${testArch}`], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 600_000,
    });
    expect(existsSync(driver)).toBe(true);
    expect(existsSync(bench)).toBe(true);
    expect(existsSync(path.join(cudaDir, testBuild, 'libkvtier_cuda.a'))).toBe(true);
  }, 600_000);

  it.skipIf(!nvcc)(`host checks pass: f16/bf16 rounding, Q8_0 repack, paged layout, GGUF reader${nvccSkip}`, () => {
    const { status, report } = runDriver(['--cpu-only']);
    const failed = report.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
    expect(failed).toEqual([]);
    expect(status).toBe(0);
    expect(report.passed).toBeGreaterThanOrEqual(9);
  });

  it.skipIf(!nvcc || gpu.ok)('without a GPU the driver exits 77 and says why', () => {
    const { status, report } = runDriver([]);
    expect(status).toBe(77);
    expect(report.gpu).toBe('skipped');
    expect(report.skip_reason).toMatch(/no usable CUDA device: .+/);
  });

  it.skipIf(!nvcc || !gpu.ok)(`GPU checks: kernels vs CPU twins, llama forward, cache equivalence${gpuSkip}`, () => {
    const { status, report, stderr } = runDriver([]);
    const failed = report.checks.filter((c) => !c.ok).map((c) => `${c.name}: err ${c.err} > ${c.tol} ${c.detail}`);
    expect(failed, stderr).toEqual([]);
    expect(status).toBe(0);
    expect(report.checks.some((c) => c.name.startsWith('gpu/cache equivalence'))).toBe(true);
  }, 600_000);

  it.skipIf(!nvcc || !gpu.ok)(`bench --small reports prefill, decode and import rates${gpuSkip}`, () => {
    const r = spawnSync(bench, ['--small'], { encoding: 'utf8', timeout: 600_000 });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as Record<string, number>;
    expect(out.decode_tok_s).toBeGreaterThan(0);
    expect(out.prefill_2048_tok_s).toBeGreaterThan(0);
    expect(out.import_GB_s).toBeGreaterThan(0);
  }, 600_000);
});
