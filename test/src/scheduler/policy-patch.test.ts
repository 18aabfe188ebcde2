/** PUT /admin/policy's merge, the one both modes use (src/scheduler/policy-patch.ts). */
import { describe, expect, it } from 'vitest';

import { defaultPolicyDoc } from '../../../src/kvtier/index.ts';
import { patchPolicyDoc } from '../../../src/scheduler/policy-patch.ts';

describe('patchPolicyDoc', () => {
  it('merges classes and tenants by name, replaces scalars, and null clears an optional limit', () => {
    const base = { ...defaultPolicyDoc(), quotaBytes: 1000, clientTtlMaxMs: 60_000 };
    const next = patchPolicyDoc(base, { classes: { batch: { ttlMs: 1000 } }, defaultClass: 'agent', quotaBytes: null, clientTtlMaxMs: null });
    expect(Object.keys(next.classes).sort()).toEqual(['agent', 'batch', 'chat']);
    expect(next.defaultClass).toBe('agent');
    expect('quotaBytes' in next).toBe(false);
    expect('clientTtlMaxMs' in next).toBe(false);
    expect(patchPolicyDoc(base, {}).quotaBytes).toBe(1000);
  });

  it('ignores fields that are not the policy\'s to patch, and a bad result is refused', () => {
    const base = defaultPolicyDoc();
    const next = patchPolicyDoc(base, { version: 99, updatedAt: 5, unknown: 1 } as never);
    expect(next.version).toBe(base.version);
    expect((next as unknown as Record<string, unknown>).unknown).toBeUndefined();
    expect(() => patchPolicyDoc(base, { defaultClass: 'nope' })).toThrow(/KVT_ERR|class/i);
  });
});
