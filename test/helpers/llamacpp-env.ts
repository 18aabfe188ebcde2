/**
 * The environment of a llama.cpp reference process. On a CPU with AMX, node-llama-cpp 3.21.1
 * picks ggml's AMX buffer type, which mis-loads Q8_0 deepseek2/deepseek4 files (its tensor count
 * is off by the AMX-repacked ones, then the scheduler asserts); llamacpp-noamx.c, preloaded,
 * keeps llama.cpp on its AVX-512/AVX2 path there: the same reference math, one that loads.
 * Built once per source with the system C compiler into the synthetic-model cache.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const SOURCE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'llamacpp-noamx.c');

let env: NodeJS.ProcessEnv | null = null;

function cpuHasAmx(): boolean {
  try {
    return /\bamx_tile\b/.test(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return false;
  }
}

function noAmxLibrary(): string {
  const source = readFileSync(SOURCE);
  const dir = process.env.KVTIER_SYNTHETIC_CACHE ?? path.join(tmpdir(), 'kvtier-test-synthetic');
  const out = path.join(dir, `llamacpp-noamx-${createHash('sha256').update(source).digest('hex').slice(0, 12)}.so`);
  if (existsSync(out)) return out;
  mkdirSync(dir, { recursive: true });
  const partial = `${out}.${process.pid}.tmp`;
  execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', partial, SOURCE, '-ldl'], { stdio: 'pipe' });
  renameSync(partial, out);
  return out;
}

export function llamaCppEnv(): NodeJS.ProcessEnv {
  if (env) return env;
  env = cpuHasAmx() ? { ...process.env, LD_PRELOAD: [noAmxLibrary(), process.env.LD_PRELOAD].filter(Boolean).join(' ') } : process.env;
  return env;
}
