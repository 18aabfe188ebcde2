import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';

import { RedisMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { startRedis } from '../../../helpers/redis-server.ts';
import { keyOf, recordOf } from './plane-conformance.ts';
import { suiteFixture } from '../../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startRedis(), (s) => s.stop());

/** Every key in the server with its type. */
async function keysOf(admin: Redis): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const key of await admin.keys('*')) out.set(key, await admin.type(key));
  return out;
}

describe('Redis plane: keys of the naming before the hash tag', () => {
  it('the first open after the upgrade unlinks the old keys (exact names and record buckets) and nothing else; later opens skip the sweep', async () => {
    const admin = new Redis(server().url);
    const keyPrefix = 'leg:plane:';
    const logged: Record<string, unknown>[] = [];
    const logger = { warn: () => undefined, info: (fields: Record<string, unknown>) => logged.push(fields) };
    try {
      // A plane of the old naming, as an earlier version left it.
      const old = [`${keyPrefix}gen`, `${keyPrefix}use`, `${keyPrefix}cap`, `${keyPrefix}usage`, `${keyPrefix}orph`, `${keyPrefix}r:16:ab12`, `${keyPrefix}r:16:0`, `${keyPrefix}r:14:3fff`];
      await admin.set(`${keyPrefix}gen`, 'abc:1');
      await admin.zadd(`${keyPrefix}use`, 1, 'm1', 2, 'm2');
      await admin.zadd(`${keyPrefix}cap`, 1, 'm1');
      await admin.hset(`${keyPrefix}usage`, 'b|g', '10', 'n|g', '1');
      await admin.hset(`${keyPrefix}orph`, 'm3', '5');
      for (const bucket of old.slice(5)) await admin.hset(bucket, 'f', 'v');
      // Keys that only look alike, another plane's, and another application's: all stay.
      const others = [`${keyPrefix}genx`, `${keyPrefix}r:notabucket`, `${keyPrefix}r:16:ab12:x`, `${keyPrefix}users`, 'other:plane:gen', 'other:plane:r:16:ab12', 'bull:queue:id', 'leg:planer:16:ab'];
      for (const key of others) await admin.set(key, 'keep');
      expect([...(await keysOf(admin)).keys()].filter((key) => old.includes(key))).toHaveLength(old.length);

      const plane = await RedisMetadataPlane.open({ url: server().url, keyPrefix, logger });
      await plane.upsert([recordOf(1), recordOf(2, { trafficClass: 'agent' })]);
      const after = await keysOf(admin);
      expect(old.filter((key) => after.has(key))).toEqual([]);
      for (const key of others) expect(await admin.get(key)).toBe('keep');
      // The new plane's own keys (hash tag {0}) are there and hold the records.
      expect([...after.keys()].filter((key) => key.startsWith(`${keyPrefix}{0}:r:`)).length).toBeGreaterThan(0);
      expect(logged).toEqual([expect.objectContaining({ removed: old.length, prefix: keyPrefix })]);

      // Marked done: an old-named key appearing later is not looked for again, and the new plane is intact.
      await admin.set(`${keyPrefix}gen`, 'late');
      const second = await RedisMetadataPlane.open({ url: server().url, keyPrefix, logger });
      expect(await admin.get(`${keyPrefix}gen`)).toBe('late');
      expect((await second.get([keyOf(1), keyOf(2)])).map((record) => record?.key)).toEqual([keyOf(1), keyOf(2)]);
      expect(logged).toHaveLength(1);
      await second.close();
      await plane.close();
    } finally {
      admin.disconnect();
    }
  });
});
