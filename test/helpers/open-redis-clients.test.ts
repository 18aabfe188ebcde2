/**
 * The open-Redis-client check (open-redis-clients.ts, a setup file of every test run): a test file
 * that leaves an ioredis client open fails, naming where the client was made; one that disconnects
 * it passes. Each case is a vitest run of its own, in a child, on a throwaway root.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { freePort } from './free-port.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const require = createRequire(import.meta.url);
const IOREDIS = pathToFileURL(require.resolve('ioredis')).href;
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs');

describe('a test file that leaves a Redis client open', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-open-clients-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const runFile = (body: string) => {
    writeFileSync(join(dir, 'vitest.config.mjs'), `export default { test: { include: ['case.test.mjs'], globals: true, setupFiles: [${JSON.stringify(join(ROOT, 'test/helpers/open-redis-clients.ts'))}] } };\n`);
    writeFileSync(join(dir, 'case.test.mjs'), `import { Redis } from ${JSON.stringify(IOREDIS)};\n${body}\n`);
    return spawnSync(process.execPath, [VITEST, 'run', '--root', dir, '--config', join(dir, 'vitest.config.mjs')], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, NO_COLOR: '1' } });
  };

  it('fails, naming the line that made it', async () => {
    // Nothing listens there: the client keeps trying, as a leaked one does once its server stopped.
    const port = await freePort();
    const run = runFile(`it('leaks', () => { const client = new Redis(${port}, { lazyConnect: false }); client.on('error', () => {}); });`);
    expect(run.status, run.stdout + run.stderr).not.toBe(0);
    expect(run.stdout + run.stderr).toMatch(/1 Redis client\(s\) left open by this file/);
    expect(run.stdout + run.stderr).toMatch(/case\.test\.mjs:\d+/);
  });

  it("ioredis's slot refresher still waiting on its reply at the file's end is awaited, not called a leak; one that never ends is", async () => {
    const port = await freePort();
    // As ioredis does: its refresher ends itself once CLUSTER SLOTS answers (here: a moment after the file's last test).
    const ends = runFile(`it('refreshes', () => { const client = new Redis(${port}, { lazyConnect: false, connectionName: 'ioredis-cluster(refresher)' }); client.on('error', () => {}); setTimeout(() => client.disconnect(), 300); });`);
    expect(ends.status, ends.stdout + ends.stderr).toBe(0);
    const never = runFile(`it('refreshes', () => { const client = new Redis(${port}, { lazyConnect: false, connectionName: 'ioredis-cluster(refresher)' }); client.on('error', () => {}); });`);
    expect(never.status, never.stdout + never.stderr).not.toBe(0);
    expect(never.stdout + never.stderr).toMatch(/1 Redis client\(s\) left open by this file/);
  });

  it('passes when the file disconnects it', async () => {
    const port = await freePort();
    const run = runFile(`it('closes', () => { const client = new Redis(${port}, { lazyConnect: false }); client.on('error', () => {}); client.disconnect(); });`);
    expect(run.status, run.stdout + run.stderr).toBe(0);
  });
});
