/** KVTIER_DISPATCH, KVTIER_HANDOFF and KVTIER_ROLE: defaults, env and flags, and a bad value stopping the process at start. */
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
    expect(config.handoff).toBe('direct');
    expect(loadConfig({ KVTIER_HANDOFF: 'queue' }).handoff).toBe('queue');
    expect(loadConfig({}, ['--handoff', 'queue']).handoff).toBe('queue');
  });

  it('KVTIER_REDIS_CLUSTER is the cluster form of the Redis address; with REDIS_URL too, or malformed, it is KVT_ERR_CONFIG_INVALID', () => {
    expect(loadConfig({ KVTIER_REDIS_CLUSTER: '10.0.0.1:7000, redis-b:7001,[::1]:7002' }).redisUrl).toBe('redis-cluster://10.0.0.1:7000,redis-b:7001,[::1]:7002');
    expect(loadConfig({}, ['--redis-cluster', 'a:1']).redisUrl).toBe('redis-cluster://a:1');
    expect(loadConfig({ REDIS_URL: 'redis://r:6379' }).redisUrl).toBe('redis://r:6379');
    expect(() => loadConfig({ REDIS_URL: 'redis://r:6379', KVTIER_REDIS_CLUSTER: 'a:1' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'KVTIER_REDIS_CLUSTER' }));
    expect(() => loadConfig({ KVTIER_REDIS_CLUSTER: 'a:1,b' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'KVTIER_REDIS_CLUSTER', message: expect.stringContaining('"b" is not host:port') }));
    expect(() => loadConfig({ KVTIER_REDIS_CLUSTER: ' , ' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID' }));
    expect(loadConfig({}).planeShards).toBe(1);
    expect(loadConfig({ KVTIER_PLANE_SHARDS: '4' }).planeShards).toBe(4);
    expect(() => loadConfig({ KVTIER_PLANE_SHARDS: '3' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'KVTIER_PLANE_SHARDS' }));
  });

  it('a bad value is KVT_ERR_CONFIG_INVALID naming the variable and the choices', () => {
    expect(() => loadConfig({ KVTIER_DISPATCH: 'random' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'KVTIER_DISPATCH', message: expect.stringContaining('aware, shared, roundrobin') }));
    expect(() => loadConfig({ KVTIER_ROLE: 'Decode' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'KVTIER_ROLE', message: expect.stringContaining('both, prefill, decode') }));
    expect(() => loadConfig({ KVTIER_HANDOFF: 'Direct' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: 'KVTIER_HANDOFF', message: expect.stringContaining('direct, queue') }));
    expect(() => loadConfig({}, ['--role', 'sideways'])).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_INVALID', param: '--role' }));
  });

  it('`kvtier worker --role sideways` exits non-zero with the error and its hint', () => {
    const run = spawnSync(process.execPath, [join(ROOT, 'bin/kvtier.js'), 'worker', '--role', 'sideways'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1' }, timeout: 60_000 });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('KVT_ERR_CONFIG_INVALID');
    expect(run.stderr).toContain('--role=sideways: use one of both, prefill, decode');
  }, 60_000);
});
