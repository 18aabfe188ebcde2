/**
 * Abandoned work stops (embedded mode): a streaming client that hangs up
 * mid-reply cancels its sequence at the engine thread's next step, and the
 * sequence's KV pages go back to the pool. Checked on the scheduler's own
 * state (GET /admin/stats → tier.scheduler), not on timings.
 */
import { describe, expect, it } from 'vitest';

import { abandonedStreamChecks } from './abandoned-streams-fixture.ts';
import { ADMIN_TOKEN, startTestServer } from './server-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer({ requestTimeoutMs: 60_000 }), (s) => s.close());

describe('a streaming client that disconnects (in-process runner)', () => {
  abandonedStreamChecks(() => ({
    url: server().url,
    schedulerState: async () => {
      const response = await fetch(`${server().url}/admin/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(response.status).toBe(200);
      return ((await response.json()) as { tier: { scheduler: unknown } }).tier.scheduler as never;
    },
  }));

  it('the stats route exposes the scheduler state the checks read', async () => {
    const response = await fetch(`${server().url}/admin/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const body = (await response.json()) as { tier: { scheduler: Record<string, unknown> } };
    expect(body.tier.scheduler).toMatchObject({ waiting: 0, running: 0, pool: { freeBlocks: expect.any(Number), totalBlocks: expect.any(Number) } });
  });
});
