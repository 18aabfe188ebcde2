/**
 * KvTier.purge on one node (embedded mode: the default LMDB plane under the
 * tier's data dir) over a real fs store: a purged block is no hit at all —
 * not in the index, not in the tier's plane, not in memory — and a request
 * afterwards recomputes it with the same reply. Blocks the filter does not
 * name stay hits.
 */
import { describe, expect, it } from 'vitest';

import type { KvNamespace } from '../../../src/kvtier/index.ts';
import { randomTokens } from '../../inference-core/engine-fixtures.ts';
import {
  BLOCK,
  computedOf,
  greedyAlone,
  openSchedulerRig,
  prefilledOf,
  schedulerJob,
  startScheduler,
  tokensOf,
} from '../scheduler/scheduler-fixtures.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const rig = suiteFixture(() => openSchedulerRig(4, 'kvtier-purge-'), (r) => r.close());

describe('KvTier.purge', () => {
  it('by tenant, then --all: lookups of purged blocks find 0 hits, the other tenant keeps its hits until --all, and a request afterwards recomputes with the same reply', async () => {
    const { engine, tier } = rig();
    const { scheduler, finished } = startScheduler(rig());
    const prompt = randomTokens(4 * BLOCK + 5, engine.vocabSize, 401);
    const salts = { a: '0000a001', b: '0000b001' };
    for (const tenant of ['a', 'b'] as const) scheduler.submit(schedulerJob(tenant, prompt, { tenant, tenantSalt: salts[tenant] }));
    const first = { a: await finished('a'), b: await finished('b') };
    await tier.flush();
    const ids = Uint32Array.from(prompt);
    const namespaces: Record<'a' | 'b', KvNamespace> = {
      a: tier.namespace({ modelFingerprint: engine.fingerprint, tenantSalt: salts.a }),
      b: tier.namespace({ modelFingerprint: engine.fingerprint, tenantSalt: salts.b }),
    };
    const hitsOf = async (tenant: 'a' | 'b') => (await tier.lookup(namespaces[tenant], ids, { tenant, trafficClass: 'chat' })).hitBlocks;
    expect([await hitsOf('a'), await hitsOf('b')]).toEqual([4, 4]);

    const byTenant = await tier.purge({ tenant: 'a' });
    expect(byTenant.removedBlocks).toBe(4);
    expect(await hitsOf('a')).toBe(0);
    expect(await hitsOf('b')).toBe(4);

    await tier.purge({ all: true });
    expect(await hitsOf('b')).toBe(0);
    expect(tier.usage().blocks).toEqual({});

    // The retained sequences of the first turns would serve the prompt from the engine's pool: let them go.
    scheduler.dropRetained();
    for (const tenant of ['a', 'b'] as const) {
      scheduler.submit(schedulerJob(`${tenant}2`, prompt, { tenant, tenantSalt: salts[tenant] }));
      const again = await finished(`${tenant}2`);
      expect(prefilledOf(again).cachedTokens).toBe(0);
      expect(computedOf(again)).toBe(prompt.length);
      expect(tokensOf(again)).toEqual(tokensOf(first[tenant]));
    }
    expect(tokensOf(first.a)).toEqual(greedyAlone(engine, prompt, 6));
    await scheduler.close();
  });
});
