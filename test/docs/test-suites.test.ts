/**
 * The fast/slow split of test/suites.ts, as vitest itself resolves it: every
 * test file is in exactly one project (none in neither, none in both), and
 * every path the lists name is a test file that exists, so a renamed or
 * deleted file cannot leave a stale entry behind.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

import { describe, expect, it } from 'vitest';

import { SLOW, SMOKES } from '../suites.ts';

const ROOT = join(import.meta.dirname, '..', '..');

function testFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) testFiles(path, out);
    else if (name.endsWith('.test.ts')) out.push(relative(ROOT, path));
  }
  return out;
}

describe('test sets (test/suites.ts)', () => {
  const files = testFiles(join(ROOT, 'test')).sort();

  it('every SLOW and SMOKES entry is an existing test file; the smokes run in the fast set', () => {
    expect(SLOW.filter((f) => !files.includes(f)), 'stale SLOW entries').toEqual([]);
    expect(SMOKES.filter((f) => !files.includes(f)), 'stale SMOKES entries').toEqual([]);
    expect(SMOKES.filter((f) => SLOW.includes(f)), 'smokes listed as slow').toEqual([]);
    expect(new Set(SLOW).size).toBe(SLOW.length);
  });

  it('vitest puts every test file in exactly one of the projects fast and slow', () => {
    const vitest = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
    const listed = JSON.parse(execFileSync(process.execPath, [vitest, 'list', '--filesOnly', '--json'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 24 })) as { file: string; projectName: string }[];
    const projectsOf = new Map<string, string[]>();
    for (const { file, projectName } of listed) projectsOf.set(relative(ROOT, file), [...(projectsOf.get(relative(ROOT, file)) ?? []), projectName]);
    expect(files.filter((f) => !projectsOf.has(f)), 'in neither set').toEqual([]);
    expect([...projectsOf].filter(([, p]) => p.length !== 1).map(([f]) => f), 'in both sets').toEqual([]);
    for (const f of SLOW) expect(projectsOf.get(f), f).toEqual(['slow']);
    for (const f of files.filter((f) => !SLOW.includes(f))) expect(projectsOf.get(f), f).toEqual(['fast']);
  }, 120_000);
});
