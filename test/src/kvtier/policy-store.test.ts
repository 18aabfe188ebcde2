import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { DAY_MS, LmdbPolicyStore, RedisPolicyStore, RetentionPolicy, defaultPolicyDoc, type PolicyStore } from '../../../src/kvtier/index.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';
import { captureLogger, tempDir } from './fixtures.ts';

async function until(predicate: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('RetentionPolicy', () => {
  it('defaults to agent 3 d and chat 7 d, with tenant overrides', () => {
    const policy = new RetentionPolicy({ ...defaultPolicyDoc(), tenants: { vip: { ttlMs: { chat: 30 * DAY_MS } } } });
    expect(policy.ttlMs('agent', 'acme')).toBe(3 * DAY_MS);
    expect(policy.ttlMs('chat', 'acme')).toBe(7 * DAY_MS);
    expect(policy.ttlMs('chat', 'vip')).toBe(30 * DAY_MS);
    expect(policy.ttlMs('agent', 'vip')).toBe(3 * DAY_MS);
    expect(policy.minTtlMs).toBe(3 * DAY_MS);
  });

  it('rejects invalid documents naming the field', () => {
    const bad = (change: (doc: ReturnType<typeof defaultPolicyDoc>) => void) => {
      const doc = defaultPolicyDoc();
      change(doc);
      return () => new RetentionPolicy(doc);
    };
    expect(bad((doc) => (doc.classes.chat.ttlMs = -1))).toThrow(/classes\.chat\.ttlMs/);
    expect(bad((doc) => (doc.classes['Bad Name'] = { ttlMs: DAY_MS }))).toThrow(/class name/);
    expect(bad((doc) => (doc.defaultClass = 'nope'))).toThrow(/defaultClass/);
    expect(bad((doc) => (doc.tenants.x = { ttlMs: { batch: DAY_MS } }))).toThrow(/unknown class/);
    expect(bad((doc) => (doc.quotaBytes = 1.5))).toThrow(expect.objectContaining({ code: 'KVT_ERR_POLICY_INVALID' }));
  });
});

function policyStoreContract(name: string, openPair: () => Promise<{ a: PolicyStore; b: PolicyStore; cleanup: () => Promise<void> }>) {
  describe(`${name} policy store`, () => {
    it('starts from the default, edits atomically, and another handle sees the change within the refresh interval', async () => {
      const { a, b, cleanup } = await openPair();
      try {
        expect(a.current().ttlMs('chat', 't')).toBe(7 * DAY_MS);
        const seen: number[] = [];
        b.onChange((policy) => seen.push(policy.version));
        const updated = await a.update((doc) => {
          doc.classes.batch = { ttlMs: DAY_MS, quotaBytes: 1 << 30 };
          doc.tenants.vip = { ttlMs: { chat: 30 * DAY_MS } };
        });
        expect(updated.version).toBe(2);
        await until(() => b.current().version === 2);
        expect(b.current().ttlMs('batch', 'x')).toBe(DAY_MS);
        expect(b.current().ttlMs('chat', 'vip')).toBe(30 * DAY_MS);
        expect(seen).toContain(2);
      } finally {
        await cleanup();
      }
    });

    it('loses no edit when two handles update concurrently', async () => {
      const { a, b, cleanup } = await openPair();
      try {
        await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            (i % 2 === 0 ? a : b).update((doc) => {
              doc.tenants[`t${i}`] = { quotaBytes: i };
            }),
          ),
        );
        const final = await a.refresh();
        expect(final.version).toBe(11);
        expect(Object.keys(final.doc.tenants).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `t${i}`).sort());
      } finally {
        await cleanup();
      }
    });

    it('rejects an invalid edit and keeps the stored policy', async () => {
      const { a, cleanup } = await openPair();
      try {
        await expect(a.update((doc) => void (doc.classes.chat.ttlMs = 0))).rejects.toMatchObject({ code: 'KVT_ERR_POLICY_INVALID' });
        expect((await a.refresh()).ttlMs('chat', 'x')).toBe(7 * DAY_MS);
      } finally {
        await cleanup();
      }
    });
  });
}

policyStoreContract('LMDB', async () => {
  const dir = await tempDir();
  const path = join(dir.path, 'policy');
  const logger = captureLogger();
  const a = await LmdbPolicyStore.open({ path, refreshMs: 50, logger });
  const b = await LmdbPolicyStore.open({ path, refreshMs: 50, logger });
  return {
    a,
    b,
    cleanup: async () => {
      await a.close();
      await b.close();
      await dir.remove();
    },
  };
});

describe('LMDB policy store across processes', () => {
  it('a change made by another OS process is seen within the refresh interval', async () => {
    const dir = await tempDir();
    const path = join(dir.path, 'policy');
    const store = await LmdbPolicyStore.open({ path, refreshMs: 50, logger: captureLogger() });
    try {
      const script = `
        import { LmdbPolicyStore } from './src/kvtier/index.ts';
        const store = await LmdbPolicyStore.open({ path: ${JSON.stringify(path)} });
        await store.update((doc) => { doc.classes.chat.ttlMs = 2 * 24 * 3600 * 1000; });
        await store.close();
      `;
      await new Promise<void>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: process.cwd(), stdio: ['ignore', 'ignore', 'pipe'] });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`child exited ${code}: ${stderr}`))));
      });
      await until(() => store.current().version === 2);
      expect(store.current().ttlMs('chat', 'x')).toBe(2 * DAY_MS);
    } finally {
      await store.close();
      await dir.remove();
    }
  });
});

describe('Redis', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  let prefixCounter = 0;
  policyStoreContract('Redis', async () => {
    const keyPrefix = `test${prefixCounter++}:`;
    const logger = captureLogger();
    // refreshMs long: pub/sub must deliver the change, not the poll.
    const a = await RedisPolicyStore.open({ url: redis.url, keyPrefix, refreshMs: 60_000, logger });
    const b = await RedisPolicyStore.open({ url: redis.url, keyPrefix, refreshMs: 60_000, logger });
    return {
      a,
      b,
      cleanup: async () => {
        await a.close();
        await b.close();
      },
    };
  });

  it('fails to open against a closed port with a typed error', async () => {
    const stopped = await startRedis();
    const url = stopped.url;
    await stopped.stop();
    await expect(RedisPolicyStore.open({ url, connectTimeoutMs: 500, logger: captureLogger() })).rejects.toMatchObject({ code: 'KVT_ERR_POLICY_UNREACHABLE' });
  });
});
