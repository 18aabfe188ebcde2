/**
 * Data dirs the test fixtures make (a test server's, a spawned `kvtier serve`'s), removed after
 * the test file that made them: each holds a store of ~10 MB, and 3,279 of them (31 GB) had piled
 * up in /tmp. A test may close a server and start another on the same dir, so a dir outlives its
 * server and goes with its file (test/helpers/fixture-dirs-setup.ts, a vitest setup file: its
 * afterAll runs after the file's own, hooks running as a stack).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/** A fresh dir under the system temp dir, removed when the current test file ends. */
export function fixtureDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes every dir made since the last call (the end of the previous test file). */
export function removeFixtureDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
