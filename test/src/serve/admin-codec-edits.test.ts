/**
 * The block codec through POST /admin/policy/edit (embedded server,
 * synthetic:tiny): `setCodec` document-wide and per class, `codec` on
 * `setClass`, each gated on the served model as PUT /admin/policy is (int8
 * measures within its bound on synthetic:tiny, so no force is needed) and
 * applied before the answer; blocks stored afterwards carry the codec; a bad
 * codec, force or class is a 400 naming the field, and leaves the policy as it was.
 */
import { describe, expect, it } from 'vitest';

import type { RetentionPolicyDoc } from '../../../src/kvtier/index.ts';
import type { BlockListing, PolicyEditResult } from '../../../src/admin/index.ts';
import { admin, chat, waitFor } from './admin-fixtures.ts';
import { KEYS, startTestServer } from './server-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close(), 240_000);

const edit = (body: unknown) => admin<PolicyEditResult & { error: { code: string; param: string; message: string } }>(server().url, '/admin/policy/edit', { method: 'POST', body });

describe('codec edits through POST /admin/policy/edit', () => {
  it('rejects a bad codec, force or class with a 400 naming the field, changing nothing', async () => {
    const before = (await admin<RetentionPolicyDoc>(server().url, '/admin/policy')).body;
    const cases: Array<[unknown, string, RegExp]> = [
      [{ op: 'setCodec', codec: 'zstd' }, 'codec', /codec must be one of none, int8, fp8, int4/],
      [{ op: 'setCodec' }, 'codec', /codec is required/],
      [{ op: 'setCodec', codec: 'int8', force: 'yes' }, 'force', /force must be true or false/],
      [{ op: 'setCodec', codec: 'int8', trafficClass: '' }, 'trafficClass', /trafficClass must be a non-empty string/],
      [{ op: 'setCodec', codec: 'int8', trafficClass: 'nope' }, 'trafficClass', /unknown class "nope"/],
      [{ op: 'setClass', name: 'chat', codec: 7 }, 'codec', /codec must be one of/],
      [{ op: 'setClass', name: 'chat', ttlMs: 60_000, force: true }, 'force', /force goes with codec/],
      [{ op: 'setClass', name: 'batch', ttlMs: 60_000, create: true, codec: 'int8' }, 'codec', /add the class first/],
      [{ op: 'setClass', name: 'nope', codec: 'int8' }, 'name', /unknown class "nope"/],
    ];
    for (const [body, param, message] of cases) {
      const r = await edit(body);
      expect(`${JSON.stringify(body)} → ${r.status} ${r.body.error?.code} ${r.body.error?.param}`).toBe(`${JSON.stringify(body)} → 400 KVT_ERR_ADMIN_BAD_REQUEST ${param}`);
      expect(r.body.error.message).toMatch(message);
    }
    expect((await admin<RetentionPolicyDoc>(server().url, '/admin/policy')).body).toEqual(before);
  });

  it('setCodec and setClass {codec} change the policy the tier serves; new blocks carry the codec', async () => {
    const doc = await edit({ op: 'setCodec', codec: 'int8' });
    expect(doc.status).toBe(200);
    expect(doc.body.applied).toBe(true);
    expect(doc.body.policy.codec).toBe('int8');

    const agentTtl = (await admin<RetentionPolicyDoc>(server().url, '/admin/policy')).body.classes.agent.ttlMs;
    const perClass = await edit({ op: 'setCodec', codec: 'fp8', trafficClass: 'agent', force: true });
    expect(perClass.status).toBe(200);
    expect(perClass.body.policy.classes.agent).toEqual({ ttlMs: agentTtl, codec: 'fp8' });

    const withTtl = await edit({ op: 'setClass', name: 'agent', ttlMs: 3_600_000, codec: 'int8' });
    expect(withTtl.status).toBe(200);
    expect(withTtl.body.policy.classes.agent).toEqual({ ttlMs: 3_600_000, codec: 'int8' });
    const served = (await admin<RetentionPolicyDoc>(server().url, '/admin/policy')).body;
    expect(served.codec).toBe('int8');
    expect(served.classes.agent).toEqual({ ttlMs: 3_600_000, codec: 'int8' });

    await chat(server().url, KEYS.alice, 'Which codec stores this block?', { trafficClass: 'chat' });
    await waitFor(async () => (await admin<BlockListing>(server().url, '/admin/blocks?limit=5')).body.blocks.length > 0, 'a stored block', 60_000);
    const listing = (await admin<BlockListing>(server().url, '/admin/blocks?limit=5&stored=1')).body;
    for (const b of listing.blocks) expect(b.stored?.codec).toBe('int8');
  }, 240_000);
});
