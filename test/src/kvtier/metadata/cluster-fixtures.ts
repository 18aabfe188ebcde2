/**
 * Two KvTier "nodes" (own data dir and index, own plane handle) over one
 * shared store and one shared metadata plane, on an injected clock.
 */
import { join } from 'node:path';

import type { BlobStore } from '../../../../storage-adapters/index.ts';
import { KvTier, ManualClock, RedisPolicyStore, type KvNamespace, type MetadataPlane, type PolicyStore } from '../../../../src/kvtier/index.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from '../fixtures.ts';

export interface ClusterRig {
  clock: ManualClock;
  store: BlobStore;
  a: KvTier;
  b: KvTier;
  planeA: MetadataPlane;
  policy: PolicyStore;
  ns(tier: KvTier, tenant: string): KvNamespace;
  /** Stores `blocks` full blocks of prompt `seed` from `tier`; returns the prompt. */
  write(tier: KvTier, seed: number, blocks: number, scope: { tenant: string; trafficClass: string; ttlMs?: number }): Promise<Uint32Array>;
  hits(tier: KvTier, tokens: Uint32Array, scope: { tenant: string; trafficClass: string }): Promise<number>;
  /** Every block key on storage, and every key with a plane record. */
  storageKeys(): Promise<string[]>;
  planeKeys(): Promise<string[]>;
  close(): Promise<void>;
}

export async function openClusterRig(options: {
  store: () => Promise<BlobStore>;
  plane: () => Promise<MetadataPlane>;
  redisUrl: string;
  policyPrefix: string;
}): Promise<ClusterRig> {
  const dir = await tempDir('kvtier-cluster-');
  const clock = new ManualClock();
  const store = await options.store();
  const policy = await RedisPolicyStore.open({ url: options.redisUrl, keyPrefix: options.policyPrefix, clock, logger: captureLogger() });
  const planeA = await options.plane();
  const planeB = await options.plane();
  const open = (node: string, plane: MetadataPlane) =>
    KvTier.open({ dataDir: join(dir.path, node), store, clock, policyStore: policy, metadataPlane: plane, nodeId: node, logger: captureLogger(), hotCacheBytes: 0 });
  const a = await open('node-a', planeA);
  const b = await open('node-b', planeB);
  const ns = (tier: KvTier, tenant: string) => tier.namespace({ modelFingerprint: 'cluster-fp', tenantSalt: tenant });
  return {
    clock,
    store,
    a,
    b,
    planeA,
    policy,
    ns,
    async write(tier, seed, blocks, scope) {
      const tokens = tokensOf(64 * blocks, seed);
      tier.store({ namespace: ns(tier, scope.tenant), tokens, layout: LAYOUT, ...scope, payloads: Array.from({ length: blocks }, (_, i) => payloadFor(seed, i)) });
      await tier.flush();
      return tokens;
    },
    async hits(tier, tokens, scope) {
      const hit = await tier.lookup(ns(tier, scope.tenant), tokens, scope);
      await tier.flush();
      // A hit must also load: a lookup alone could hit an index entry whose blob is gone.
      const loaded = await tier.load(hit);
      return loaded.blocks.length;
    },
    async storageKeys() {
      const keys: string[] = [];
      for await (const key of store.list()) if (/^[0-9a-f]{32}$/.test(key)) keys.push(key);
      return keys.sort();
    },
    async planeKeys() {
      const keys: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await planeA.scanByLastUse({ cursor, limit: 256 });
        keys.push(...page.records.map((record) => record.key));
        cursor = page.cursor;
      } while (cursor !== undefined);
      return keys.sort();
    },
    async close() {
      await a.close();
      await b.close();
      await planeA.close();
      await planeB.close();
      await policy.close();
      await store.close();
      await dir.remove();
    },
  };
}
