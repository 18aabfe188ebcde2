/**
 * src/compiled-js.mjs on a throwaway checkout (a copy of the module, two .ts
 * sources, the real node_modules linked in): a build runs the sources' code,
 * an edit gets a new build, builders racing leave one whole build, and no
 * build means null with the reason.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const REPO = join(import.meta.dirname, '..', '..');
let checkout: string;

/** In a child process (the module memoizes per process): the built module of src/a.ts, imported, and its `answer`. */
async function answer(env: Record<string, string> = {}): Promise<{ built: string | null; answer: unknown; stderr: string }> {
  const script = `import { compiledModule } from './src/compiled-js.mjs';
const built = compiledModule(new URL('./src/a.ts', import.meta.url));
const answer = built ? (await import(built.href)).answer : null;
console.log(JSON.stringify({ built: built && built.href, answer }));`;
  const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: checkout, env: { ...process.env, ...env } });
  return { ...JSON.parse(stdout), stderr };
}

const builds = () => readdirSync(join(checkout, '.kvtier-js'));

beforeAll(() => {
  checkout = mkdtempSync(join(tmpdir(), 'kvtier-compiled-js-'));
  mkdirSync(join(checkout, 'src'));
  copyFileSync(join(REPO, 'src/compiled-js.mjs'), join(checkout, 'src/compiled-js.mjs'));
  symlinkSync(join(REPO, 'node_modules'), join(checkout, 'node_modules'));
  writeFileSync(join(checkout, 'package.json'), '{ "type": "module" }\n');
  writeFileSync(join(checkout, 'src/a.ts'), "import { base } from './b.ts';\nexport const answer: number = base + 1;\n");
  writeFileSync(join(checkout, 'src/b.ts'), 'export const base: number = 41;\n');
});

afterAll(() => rmSync(checkout, { recursive: true, force: true }));

describe('the JavaScript build of the sources', () => {
  it('runs the sources, with their relative .ts imports, from plain node', async () => {
    const first = await answer();
    expect(first.answer).toBe(42);
    expect(first.built).toMatch(/\/\.kvtier-js\/[0-9a-f]{16}\/src\/a\.js$/);
    expect(first.stderr).toBe('');
    // A second start uses the same build.
    expect((await answer()).built).toBe(first.built);
    expect(builds()).toHaveLength(1);
  });

  it('an edited source gets a new build: the old one is never run for it', async () => {
    const before = await answer();
    writeFileSync(join(checkout, 'src/b.ts'), 'export const base: number = 99;\n');
    const after = await answer();
    expect(after.answer).toBe(100);
    expect(after.built).not.toBe(before.built);
  });

  it('a long-lived process asked again after an edit gets the new build, not the one it found first', async () => {
    const script = `import { writeFileSync } from 'node:fs';
import { compiledModule } from './src/compiled-js.mjs';
const a = new URL('./src/a.ts', import.meta.url);
const first = compiledModule(a);
const before = (await import(first.href)).answer;
writeFileSync(new URL('./src/b.ts', import.meta.url), 'export const base: number = 1000;\\n');
const second = compiledModule(a);
console.log(JSON.stringify({ same: first.href === second.href, before, after: (await import(second.href)).answer }));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: checkout });
    expect(JSON.parse(stdout)).toEqual({ same: false, before: 100, after: 1001 });
  });

  it('processes that build at once all get the same whole build, and leave no scratch copy', async () => {
    writeFileSync(join(checkout, 'src/b.ts'), 'export const base: number = 6;\n');
    const racers = await Promise.all(Array.from({ length: 4 }, () => answer()));
    expect(racers.map((r) => r.answer)).toEqual([7, 7, 7, 7]);
    expect(new Set(racers.map((r) => r.built)).size).toBe(1);
    expect(builds().filter((name) => name.startsWith('.tmp-'))).toEqual([]);
  });

  it("a test's child script (under test/) runs from a build that holds test/ too, keyed apart from the product's", async () => {
    mkdirSync(join(checkout, 'test'), { recursive: true });
    writeFileSync(join(checkout, 'test/c.ts'), "import { answer } from '../src/a.ts';\nexport const doubled: number = answer * 2;\n");
    const script = `import { compiledModule } from './src/compiled-js.mjs';
const product = compiledModule(new URL('./src/a.ts', import.meta.url));
const child = compiledModule(new URL('./test/c.ts', import.meta.url));
console.log(JSON.stringify({ product: product.href, child: child.href, doubled: (await import(child.href)).doubled }));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: checkout });
    const { product, child, doubled } = JSON.parse(stdout) as { product: string; child: string; doubled: number };
    expect(doubled).toBe(14);
    expect(child).toMatch(/\/\.kvtier-js\/[0-9a-f]{16}\/test\/c\.js$/);
    expect(child.replace(/\/test\/c\.js$/, '')).not.toBe(product.replace(/\/src\/a\.js$/, ''));
    rmSync(join(checkout, 'test'), { recursive: true });
  });

  it('no build: null, and the reason once on stderr; KVTIER_JS=0 asks for none and says nothing', async () => {
    expect(await answer({ KVTIER_JS: '0' })).toEqual({ built: null, answer: null, stderr: '' });
    rmSync(join(checkout, '.kvtier-js'), { recursive: true, force: true });
    writeFileSync(join(checkout, '.kvtier-js'), 'not a directory');
    const none = await answer();
    expect(none.built).toBeNull();
    expect(none.stderr).toMatch(/^kvtier: running through tsx, no JavaScript build \(.*\); KVTIER_JS=0 skips the build\n$/);
    rmSync(join(checkout, '.kvtier-js'));
  });
});
