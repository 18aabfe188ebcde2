/**
 * The cache tier's admin operations (GET /admin/stats, GET/PUT /admin/policy,
 * POST /admin/gc), run wherever the tier is open: the engine thread in
 * embedded mode, the API process's own tier handle in BullMQ mode.
 */
import { CodecGate, type KvTier } from '../kvtier/index.ts';
import { KvtError } from '../errors.ts';
import type { AdminCall, AdminReply } from './engine-thread-protocol.ts';
import { patchPolicyDoc } from './policy-patch.ts';

export async function adminCall(tier: KvTier | null, call: AdminCall, extra: Record<string, unknown> = {}, codecGate: CodecGate = new CodecGate()): Promise<AdminReply> {
  if (!tier) {
    if (call.op === 'stats') return { op: 'stats', result: { ...extra, cache: null } };
    throw new KvtError('KVT_ERR_STORAGE_UNREACHABLE', `the cache tier is not open${extra.cacheProblem ? `: ${String(extra.cacheProblem)}` : ''}`);
  }
  switch (call.op) {
    case 'stats':
      return { op: 'stats', result: { ...extra, cache: tier.stats(), usage: tier.usage(), blockTokens: tier.blockTokens, storage: { kind: tier.blobStore.kind, location: tier.blobStore.location }, policyStore: tier.policy.kind } };
    case 'getPolicy':
      return { op: 'getPolicy', result: tier.policy.current().doc };
    case 'setPolicy': {
      const { force, ...patch } = call.policy ?? {};
      // Codecs the patch names must be within their bound as measured on the served model (kvtier/codecs/codec-gate.ts), unless forced.
      codecGate.checkPatch(patch, force === true);
      const next = await tier.policy.update((doc) => patchPolicyDoc(doc, patch));
      return { op: 'setPolicy', result: next.doc };
    }
    case 'gc':
      return { op: 'gc', result: await tier.gc(call.shards ? { shards: call.shards } : {}) };
    case 'purge':
      return { op: 'purge', result: await tier.purge(call.filter ?? {}, { at: call.at }) };
    default: {
      const unknownCall: { op?: unknown } = call;
      throw new KvtError('KVT_ERR_REQUEST_INVALID', `unknown admin op ${String(unknownCall.op)}`);
    }
  }
}
