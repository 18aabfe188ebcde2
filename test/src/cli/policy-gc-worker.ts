/**
 * A second process for the cross-process policy test: a cache tier on the
 * shared block store with its policy in Redis. It stores blocks, then waits
 * for the chat TTL to change (made by another process), lets the blocks age
 * past the new TTL and runs its next GC. Lines on stdout:
 *
 *   ready <blocks> <policy version>
 *   observed <policy version> <chat ttl ms>
 *   gc <GcReport JSON>
 */
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier, RedisPolicyStore } from '../../../src/kvtier/index.ts';
import { LAYOUT, payloadFor, tokensOf } from '../kvtier/fixtures.ts';

const [storeDir, dataDir, redisUrl, expectTtlMs] = process.argv.slice(2);
const store = await FsBlobStore.open({ dir: storeDir });
const policy = await RedisPolicyStore.open({ url: redisUrl });
const tier = await KvTier.open({ dataDir, store, policyStore: policy, hotCacheBytes: 0 });
const ns = tier.namespace({ modelFingerprint: 'fp-worker', tenantSalt: 'salt' });
const tokens = tokensOf(64 * 4, 7);
tier.store({ namespace: ns, tokens, payloads: [0, 1, 2, 3].map((b) => payloadFor(7, b)), layout: LAYOUT, tenant: 'acme', trafficClass: 'chat' });
await tier.flush();
const writtenAt = Date.now();
process.stdout.write(`ready 4 ${policy.current().version}\n`);

const observed = await new Promise<{ version: number; ttlMs: number }>((resolve) => {
  const check = () => {
    const current = policy.current();
    if (current.doc.classes.chat.ttlMs === Number(expectTtlMs)) resolve({ version: current.version, ttlMs: current.doc.classes.chat.ttlMs });
  };
  policy.onChange(check);
  check();
});
process.stdout.write(`observed ${observed.version} ${observed.ttlMs}\n`);
// Let the blocks age past the new TTL (counted from their last use, the write).
await new Promise((resolve) => setTimeout(resolve, Math.max(0, writtenAt + observed.ttlMs + 100 - Date.now())));
const report = await tier.gc();
process.stdout.write(`gc ${JSON.stringify(report)}\n`);
await tier.close();
await policy.close();
await store.close();
