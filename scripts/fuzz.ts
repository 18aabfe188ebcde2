/**
 * npm run fuzz -- [--minutes N] [--seed S] [filter]
 *
 * Runs the fuzzers in test/fuzz/ for longer than `npm test` does: the
 * minutes are shared between the fuzz cases (FUZZ_MS each), a seed (printed
 * by every fuzzer) reproduces a run. Exits with vitest's status.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const value = (name: string): string | undefined => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 ? argv[at + 1] : undefined;
};
const minutes = Number(value('minutes') ?? '1');
const seed = value('seed');
const filter = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
const files = readdirSync(join(REPO, 'test/fuzz'))
  .filter((f) => f.endsWith('.test.ts') && (filter.length === 0 || filter.some((x) => f.includes(x))))
  .map((f) => join('test/fuzz', f));
// About 20 fuzz loops in all; vitest runs two files at a time.
const perCaseMs = Math.max(1000, Math.floor((minutes * 60_000 * 2) / 20));
process.stdout.write(`fuzz: ${files.length} files, ${minutes} min, ${perCaseMs} ms per fuzz loop${seed ? `, seed ${seed}` : ''}\n`);
const result = spawnSync(process.execPath, [join(REPO, 'node_modules/vitest/vitest.mjs'), 'run', ...files, '--testTimeout', String(perCaseMs * 3 + 120_000)], {
  cwd: REPO,
  stdio: 'inherit',
  env: { ...process.env, FUZZ_MS: String(perCaseMs), FUZZ_MAX_CASES: process.env.FUZZ_MAX_CASES ?? String(Number.MAX_SAFE_INTEGER), ...(seed ? { FUZZ_SEED: seed } : {}) },
});
process.exitCode = result.status ?? 1;
