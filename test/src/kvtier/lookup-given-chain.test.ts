/**
 * KvTier.lookup with the caller's key chain (a worker hashes a prompt once,
 * at admission): used as given when it is this namespace's chain of these
 * tokens, and ignored otherwise — a chain hashed under another tenant's
 * namespace must not find that tenant's blocks.
 */
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier, PrefixHasher } from '../../../src/kvtier/index.ts';
import { LAYOUT, payloadFor, tempDir, tokensOf } from './fixtures.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const scope = { tenant: 'acme', trafficClass: 'chat' };

describe('KvTier.lookup with a given chain', () => {
  it("hits with its own namespace's chain; another namespace's chain, or a chain of other tokens, is hashed over", async () => {
    const dir = await tempDir('kvtier-given-chain-');
    const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, metadataRedisUrl: '', hotCacheBytes: 0 });
    cleanups.push(dir.remove, () => store.close(), () => tier.close());
    const hasher = await PrefixHasher.create({ blockTokens: tier.blockTokens });
    const mine = tier.namespace({ modelFingerprint: 'given-chain', tenantSalt: 'aaaa' });
    const theirs = tier.namespace({ modelFingerprint: 'given-chain', tenantSalt: 'bbbb' });
    const tokens = tokensOf(3 * 64, 7);
    tier.store({ namespace: theirs, tokens, fromBlock: 0, payloads: [payloadFor(7, 0), payloadFor(7, 1), payloadFor(7, 2)], layout: LAYOUT, ...scope });
    await tier.flush();

    const theirChain = hasher.chain(theirs.keyBytes, tokens);
    expect((await tier.lookup(theirs, tokens, scope, theirChain)).hitBlocks).toBe(3);
    // Their chain handed in with my namespace: my namespace's keys are hashed instead, and I have nothing.
    expect((await tier.lookup(mine, tokens, scope, theirChain)).hitBlocks).toBe(0);
    // A chain of fewer blocks than the tokens have is not these tokens' chain.
    expect((await tier.lookup(theirs, tokens, scope, hasher.chain(theirs.keyBytes, tokens.subarray(0, 64)))).hitBlocks).toBe(3);
  });
});
