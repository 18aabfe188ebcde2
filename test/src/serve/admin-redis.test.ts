/**
 * The admin side in BullMQ mode (REDIS_URL set): policy and stats live in
 * Redis, so a second API process sees the same policy and the same figures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { RetentionPolicyDoc } from '../../../src/kvtier/index.ts';
import type { OverviewResponse, PolicyEditResult } from '../../../src/admin/index.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';
import { admin } from './admin-fixtures.ts';
import { startTestServer, type TestServer } from './server-fixture.ts';

let redis: RedisServer;
let first: TestServer;
let second: TestServer;

beforeAll(async () => {
  redis = await startRedis();
  first = await startTestServer({ redisUrl: redis.url });
  second = await startTestServer({ redisUrl: redis.url });
}, 120_000);

afterAll(async () => {
  await first?.close();
  await second?.close();
  await redis?.stop();
});

describe('admin with REDIS_URL', () => {
  it('a policy edit on one API process is read by the other; both report from the Redis stats store', async () => {
    const edit = await admin<PolicyEditResult>(first.url, '/admin/policy/edit', { method: 'POST', body: { op: 'setClass', name: 'agent', ttlMs: 12 * 3_600_000 } });
    expect(edit.status).toBe(200);
    expect(edit.body.applied).toBe(true);
    const deadline = Date.now() + 10_000;
    let seen: RetentionPolicyDoc;
    do {
      seen = (await admin<RetentionPolicyDoc>(second.url, '/admin/policy')).body;
      if (seen.version === edit.body.policy.version) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    } while (Date.now() < deadline);
    expect(seen.classes.agent.ttlMs).toBe(12 * 3_600_000);
    const [a, b] = await Promise.all([first, second].map(async (s) => (await admin<OverviewResponse>(s.url, '/admin/stats/overview')).body));
    expect(a.source.statsStore).toBe('redis');
    expect(b.source.policyStore).toBe('redis');
    expect(a.overview.requests).toBe(b.overview.requests);
  });
});
