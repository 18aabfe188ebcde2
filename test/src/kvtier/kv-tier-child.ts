/**
 * One KvTier process for the cross-process test:
 *   tsx kv-tier-child.ts <write|read> <storeDir> <dataDir> <seed> <blocks>
 * write: stores <blocks> blocks of prompt <seed>, flushes, prints {"written": n}.
 * read: looks the prompt up and loads it, prints {"hitBlocks", "adoptedBlocks", "payloadOk"}.
 */
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import { LAYOUT, payloadFor, tokensOf } from './fixtures.ts';

const [mode, storeDir, dataDir, seedText, blocksText] = process.argv.slice(2);
const seed = Number(seedText);
const blocks = Number(blocksText);
const store = await FsBlobStore.open({ dir: storeDir });
const tier = await KvTier.open({ dataDir, store });
const scope = { tenant: 'acme', trafficClass: 'chat' };
const ns = tier.namespace({ modelFingerprint: 'cross-process-fp', tenantSalt: 'acme' });
const tokens = tokensOf(blocks * 64 + 3, seed);
if (mode === 'write') {
  tier.store({ namespace: ns, tokens, layout: LAYOUT, ...scope, payloads: Array.from({ length: blocks }, (_, b) => payloadFor(seed, b)) });
  await tier.flush();
  process.stdout.write(JSON.stringify({ written: tier.stats().blocksWritten }));
} else {
  const hit = await tier.lookup(ns, tokens, scope);
  const loaded = await tier.load(hit);
  const payloadOk = loaded.blocks.every((block, b) => Buffer.from(block.payload).equals(Buffer.from(payloadFor(seed, b))));
  process.stdout.write(JSON.stringify({ hitBlocks: hit.hitBlocks, adoptedBlocks: hit.adoptedBlocks, loadedBlocks: loaded.blocks.length, payloadOk }));
}
await tier.close();
await store.close();
