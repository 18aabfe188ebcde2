import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';

import { RedisMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { startRedis } from '../../../helpers/redis-server.ts';
import { keyOf, recordOf } from './plane-conformance.ts';
import { suiteFixture } from '../../../helpers/suite-fixture.ts';

/** CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with. */
function crc16(bytes: Buffer): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** Redis Cluster's slot of a key: the first non-empty `{...}` is hashed instead of the whole key. */
function keySlot(key: string): number {
  const bytes = Buffer.from(key, 'latin1');
  const open = bytes.indexOf('{');
  if (open >= 0) {
    const close = bytes.indexOf('}', open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % 16384;
  }
  return crc16(bytes) % 16384;
}

const server = suiteFixture(() => startRedis(), (s) => s.stop());

// No Redis Cluster is run here: the slots are computed as a cluster node computes them, over
// every key the plane's scripts and commands touched on a plain redis-server (seen by MONITOR).
describe('Redis plane keys and Redis Cluster slots', () => {
  it('the slot function matches Redis Cluster (reference values)', () => {
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(keySlot('foo{}{bar}')).toBe(crc16(Buffer.from('foo{}{bar}')) % 16384);
  });

  it('every key a plane command or script touches maps to one slot', async () => {
    const keyPrefix = 'slots:plane:';
    const plane = await RedisMetadataPlane.open({ url: server().url, keyPrefix, bucketBits: 12 });
    // monitor() opens a duplicate in MONITOR mode; the client it was called on stays open until disconnected.
    const monitorBase = new Redis(server().url);
    const monitor = await monitorBase.monitor();
    const admin = new Redis(server().url);
    const touched = new Set<string>();
    let sawMarker = false;
    monitor.on('monitor', (_time: string, args: string[]) => {
      const [command, key] = args;
      if (command.toLowerCase() === 'get' && key === 'slots:marker') sawMarker = true;
      // A channel is no key: PUBLISH reaches every node of a cluster.
      else if (/^(p|s)?(un)?subscribe$|^publish$/i.test(command)) touched.add(`channel ${key}`);
      else if (key !== undefined && key.startsWith(keyPrefix)) touched.add(`${command.toLowerCase()} ${key}`);
      // Script invocations: their declared keys.
      if (/^evalsha$|^eval$/i.test(command)) for (const declared of args.slice(3, 3 + Number(args[2]))) touched.add(`declared ${declared}`);
    });
    try {
      await plane.state();
      await plane.markTrusted((await plane.state()).generation);
      await plane.upsert([recordOf(1), recordOf(2, { trafficClass: 'agent', ttlMs: 60_000 }), recordOf(3, { tenant: 'other' })]);
      await plane.upsert([recordOf(1, { trafficClass: 'agent' })]);
      plane.renew([keyOf(1), keyOf(2)], Date.UTC(2026, 0, 2));
      await plane.flush();
      await plane.get([keyOf(1), keyOf(9)]);
      await plane.scanByLastUse({ limit: 2 });
      await plane.scanByLastUse({ trafficClass: 'agent', limit: 1 });
      await plane.scanByLastUse({ capped: true });
      await plane.remove([keyOf(1), keyOf(3)], { judgedLastUseAt: [Date.UTC(2026, 0, 3), 0] });
      await plane.remove([keyOf(2)]);
      await plane.upsert([recordOf(4, { trafficClass: 'agent', ttlMs: 60_000 }), recordOf(5, { trafficClass: 'agent' })]);
      await plane.removeByLastUse({ trafficClass: 'agent', maxLastUseAt: Date.UTC(2026, 0, 9), limit: 10, journal: true });
      await plane.pendingDeletes();
      await plane.clearPendingDeletes([keyOf(4)]);
      await plane.clearPendingDeletes([keyOf(5)]);
      await plane.noteOrphans([keyOf(5)], 1);
      await plane.orphanSightings();
      await plane.clearOrphans([keyOf(5)]);
      await plane.usage();
      await admin.get('slots:marker');
      const deadline = Date.now() + 5000;
      while (!sawMarker && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(sawMarker).toBe(true);

      const keys = [...new Set([...touched].filter((entry) => !entry.startsWith('channel ')).map((entry) => entry.slice(entry.indexOf(' ') + 1)))];
      expect(touched.has(`channel ${keyPrefix}removed`)).toBe(true);
      // The scripts really ran inside Redis and reached the derived keys (buckets, class indexes).
      expect([...touched].some((entry) => /^hget slots:plane:\{0\}:r:12:/.test(entry))).toBe(true);
      expect([...touched].some((entry) => entry.startsWith('zadd slots:plane:{0}:u:agent'))).toBe(true);
      expect([...touched].some((entry) => entry.startsWith('declared '))).toBe(true);
      expect(keys.length).toBeGreaterThan(8);
      const slots = new Set(keys.map(keySlot));
      expect(slots).toEqual(new Set([keySlot(`${keyPrefix}{0}:gen`)]));
    } finally {
      monitor.disconnect();
      monitorBase.disconnect();
      admin.disconnect();
      await plane.close();
    }
  });

  it('a key prefix with braces is refused (it would replace the plane hash tag)', async () => {
    await expect(RedisMetadataPlane.open({ url: server().url, keyPrefix: 'a{b}:' })).rejects.toMatchObject({ code: 'KVT_ERR_PLANE_OPEN' });
  });
});
