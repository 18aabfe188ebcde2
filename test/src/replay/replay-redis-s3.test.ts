/**
 * The replay through the cluster's tier: blocks on S3 (a real Ceph RGW on
 * loopback), the metadata plane and the policy in Redis. Time compressed;
 * TTLs 5 min and 1 h give exactly the definition's hits, request by request
 * (every 80th conversation request, so the run spans the hour).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, expect, it } from 'vitest';

import { readTrace, runReplay, TierTarget } from '../../../src/replay/index.ts';
import { startCephS3, type CephS3 } from '../../helpers/ceph-s3.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';
import { CONVERSATION, definitionHits, writeGenericSubsample } from './trace-fixtures.ts';

let s3: CephS3;
let redis: RedisServer;
beforeAll(async () => {
  [s3, redis] = await Promise.all([startCephS3(), startRedis()]);
}, 180_000);
afterAll(async () => {
  await s3?.stop();
  await redis?.stop();
});

it('S3 + Redis, time compressed: TTLs 5 min and 1 h give exactly the definition\'s hits', async () => {
  const path = join(mkdtempSync(join(tmpdir(), 'kvtier-replay-s3-')), 'sub.jsonl');
  const requests = writeGenericSubsample(CONVERSATION, 80, path);
  const trace = readTrace(path);
  for (const ttlMs of [300_000, 3_600_000]) {
    const run = randomUUID().slice(0, 8);
    const storage = `s3://kvtier-replay/${run}?endpoint=${encodeURIComponent(s3.endpoint)}&region=${s3.region}&forcePathStyle=true&createBucket=true&accessKeyId=${s3.accessKeyId}&secretAccessKey=${s3.secretAccessKey}`;
    const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-replay-node-'));
    const target = await TierTarget.open({ dataDir, storage, redisUrl: redis.url, redisKeyPrefix: `replay-${run}:`, blockTokens: 512, ttlMs, classes: ['chat', 'agent'] });
    try {
      const outcome = await runReplay(trace, target, { sampleEveryMs: 0 });
      const expected = definitionHits(requests, ttlMs);
      expect(Array.from(outcome.hitBlocks), `TTL ${ttlMs}`).toEqual(expected);
      expect(outcome.total.hitTokens).toBe(expected.reduce((a, b) => a + b, 0) * 512);
    } finally {
      await target.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
}, 900_000);
