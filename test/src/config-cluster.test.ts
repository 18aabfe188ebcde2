/** KVTIER_DISPATCH and KVTIER_ROLE: defaults, env and flags, and a bad value stopping the process at start. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

describe('cluster settings', () => {
  it('default to cache-aware dispatch and colocated workers; env and flags set them', () => {
    const config = loadConfig({}, []);
    expect(config.dispatch).toBe('aware');
    expect(config.role).toBe('both');
    expect(loadConfig({ KVTIER_DISPATCH: 'shared', KVTIER_ROLE: 'decode' }).dispatch).toBe('shared');
    expect(loadConfig({ KVTIER_ROLE: 'decode' }).role).toBe('decode');
    expect(loadConfig({ KVTIER_ROLE: 'decode' }, ['--role', 'prefill']).role).toBe('prefill');
    expect(loadConfig({}, ['--kvtier-dispatch=shared']).dispatch).toBe('shared');
    expect(loadConfig({ KVTIER_DISPATCH: 'roundrobin' }).dispatch).toBe('roundrobin');
  });

  it('a bad value is KVT_ERR_CONFIG_INVALID naming the variable and the choices', () => {
    expect(() => loadConfig({ KVTIER_DISPATCH: 'random' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'KVTIER_DISPATCH', message: expect.stringContaining('aware, shared, roundrobin') }));
    expect(() => loadConfig({ KVTIER_ROLE: 'Decode' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'KVTIER_ROLE', message: expect.stringContaining('both, prefill, decode') }));
    expect(() => loadConfig({}, ['--role', 'sideways'])).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: '--role' }));
  });

  it('`kvtier worker --role sideways` exits non-zero with the error and its hint', () => {
    const run = spawnSync(process.execPath, [join(ROOT, 'bin/kvtier.js'), 'worker', '--role', 'sideways'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1' }, timeout: 60_000 });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('KVT_ERR_CONFIG_INVALID');
    expect(run.stderr).toContain('--role=sideways: use one of both, prefill, decode');
  }, 60_000);
});
