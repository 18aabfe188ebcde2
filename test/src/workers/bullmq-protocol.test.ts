/**
 * The job's token ids on the BullMQ wire: typed as Uint32Array on both
 * sides, a plain number array in the JSON between (the one conversion each
 * way); a Uint32Array put in JSON as is would arrive as an object of digits.
 */
import { describe, expect, it } from 'vitest';

import { fromQueued, toQueued } from '../../../src/workers/bullmq-protocol.ts';
import type { RequestSpec } from '../../../src/scheduler/job.ts';

const job: RequestSpec = {
  id: 'j1',
  model: 'synthetic:tiny',
  tenant: 't',
  tenantSalt: 'aa',
  trafficClass: 'chat',
  tokens: Uint32Array.from([1, 70_000, 4_000_000_000, 0]),
  sampling: { maxTokens: 3, temperature: 0, topP: 1, topK: 0, seed: 1, stopTokenIds: [2] },
  submittedAt: 123,
};

describe('BullMQ job tokens', () => {
  it('survive the JSON round trip as the same Uint32Array, once converted each way', () => {
    const wire = JSON.parse(JSON.stringify(toQueued(job, 'reply-1')));
    expect(wire.tokens).toEqual([1, 70_000, 4_000_000_000, 0]);
    const taken = fromQueued(wire);
    expect(taken.tokens).toBeInstanceOf(Uint32Array);
    expect(Array.from(taken.tokens)).toEqual(Array.from(job.tokens));
    expect(taken.replyChannel).toBe('reply-1');
    expect(JSON.parse(JSON.stringify(job)).tokens).not.toBeInstanceOf(Array);
  });
});
