/**
 * Encryption at rest through KvTier on a real fs store: what lands on storage
 * is sealed and unreadable, loads give back the same payloads, and every blob
 * that should not open (other tenant, tampered, moved, unknown key id, sealed
 * vs plaintext mismatch) is a counted miss — never an exception, never
 * plaintext — and stays on storage.
 */
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../../storage-adapters/index.ts';
import { KvTier, ManualClock, PrefixHasher, type KvTierOptions } from '../../../../src/kvtier/index.ts';
import { BlockSealer, keyringFromSecret, looksSealed, parseKeyringJson, readSealHeader, SEAL_HEADER_BYTES, type SealKeyringSpec } from '../../../../src/kvtier/seal/index.ts';
import { captureLogger, LAYOUT, payloadFor, tempDir, tokensOf } from '../fixtures.ts';

const SECRET_1 = 'seal-test-secret-one-0123456789abcdef';
const SECRET_2 = 'seal-test-secret-two-fedcba9876543210';
const FINGERPRINT = 'seal-model-fp';
const BLOCKS = 4;

let dir: { path: string; remove: () => Promise<void> };
let store: FsBlobStore;
let clock: ManualClock;
let logger: ReturnType<typeof captureLogger>;
const tiers: KvTier[] = [];
let nodes = 0;
const hasher = await PrefixHasher.create();

beforeEach(async () => {
  dir = await tempDir('kvtier-seal-');
  store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
  clock = new ManualClock();
  logger = captureLogger();
});

afterEach(async () => {
  for (const tier of tiers.splice(0)) await tier.close();
  await store.close();
  await dir.remove();
});

/** Each tier gets its own node dir unless told otherwise, so reads go to storage (hot cache off, nothing pending). */
async function openTier(keyring: SealKeyringSpec | null, extra: Partial<KvTierOptions> & { node?: string } = {}): Promise<KvTier> {
  const tier = await KvTier.open({
    dataDir: join(dir.path, extra.node ?? `node-${nodes++}`),
    store,
    clock,
    logger,
    hotCacheBytes: 0,
    touchIntervalMs: 0,
    ...(keyring ? { seal: new BlockSealer(keyring) } : {}),
    ...extra,
  });
  tiers.push(tier);
  return tier;
}

function scopeOf(tenant: string) {
  return { tenant, trafficClass: 'chat' };
}

async function storePrompt(tier: KvTier, tokens: Uint32Array, seed: number, salt = 'salt-alice', tenant = 'alice'): Promise<void> {
  const namespace = tier.namespace({ modelFingerprint: FINGERPRINT, tenantSalt: salt });
  const receipt = tier.store({ namespace, tokens, layout: LAYOUT, ...scopeOf(tenant), payloads: Array.from({ length: BLOCKS }, (_, b) => payloadFor(seed, b)) });
  expect(receipt.queued).toBe(BLOCKS);
  await tier.flush();
}

async function loadPrompt(tier: KvTier, tokens: Uint32Array, salt = 'salt-alice', tenant = 'alice') {
  const namespace = tier.namespace({ modelFingerprint: FINGERPRINT, tenantSalt: salt });
  const hit = await tier.lookup(namespace, tokens, scopeOf(tenant));
  return { hit, loaded: await tier.load(hit) };
}

function keyOf(tokens: Uint32Array, block: number, salt = 'salt-alice'): string {
  return hasher.chain(hasher.namespaceKeyBytes({ modelFingerprint: FINGERPRINT, tenantSalt: salt }), tokens).keyHex(block);
}

function contains(haystack: Uint8Array, needle: Uint8Array): boolean {
  return Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength).includes(Buffer.from(needle.buffer, needle.byteOffset, needle.byteLength));
}

describe('KvTier with encryption at rest', () => {
  it('round trip: sealed on storage, nothing readable in it, same payloads back', async () => {
    const tokens = tokensOf(64 * BLOCKS, 11);
    const writer = await openTier(keyringFromSecret(SECRET_1));
    await storePrompt(writer, tokens, 11);
    for (let b = 0; b < BLOCKS; b++) {
      const stored = (await store.get(keyOf(tokens, b)))!;
      expect(looksSealed(stored)).toBe(true);
      expect(readSealHeader(stored).keyId).toBe(1);
      const blockTokens = tokens.subarray(b * 64, b * 64 + 64);
      const tokenBytes = new Uint8Array(blockTokens.buffer, blockTokens.byteOffset, 64 * 4);
      for (let from = 0; from + 16 <= tokenBytes.length; from += 4) expect(contains(stored, tokenBytes.subarray(from, from + 16))).toBe(false);
      expect(contains(stored, payloadFor(11, b).subarray(0, 32))).toBe(false);
      expect(contains(stored, new TextEncoder().encode(FINGERPRINT))).toBe(false);
    }
    // Another node (another index, same store and secret) adopts and opens them.
    const reader = await openTier(keyringFromSecret(SECRET_1));
    const { hit, loaded } = await loadPrompt(reader, tokens);
    expect(hit.hitBlocks).toBe(BLOCKS);
    expect(loaded.stoppedAt).toBeUndefined();
    expect(loaded.blocks.map((b) => Array.from(b.payload))).toEqual(Array.from({ length: BLOCKS }, (_, b) => Array.from(payloadFor(11, b))));
    expect(loaded.blocks.map((b) => Array.from(b.tokens))).toEqual(Array.from({ length: BLOCKS }, (_, b) => Array.from(tokens.subarray(b * 64, b * 64 + 64))));
    expect(reader.stats().errors).toEqual({});
  });

  it('a tenant whose key does not open a blob gets a miss and an error count, no exception', async () => {
    const tokens = tokensOf(64 * BLOCKS, 12);
    const writer = await openTier(keyringFromSecret(SECRET_1));
    await storePrompt(writer, tokens, 12);
    // Bob asks for the same tokens under his salt: other keys, nothing stored there. Plant Alice's blobs under Bob's keys.
    for (let b = 0; b < BLOCKS; b++) await store.put(keyOf(tokens, b, 'salt-bob'), (await store.get(keyOf(tokens, b)))!);
    const bob = await openTier(keyringFromSecret(SECRET_1));
    const { hit, loaded } = await loadPrompt(bob, tokens, 'salt-bob', 'bob');
    expect(hit.hitBlocks).toBe(BLOCKS); // the blobs exist …
    expect(loaded.blocks).toHaveLength(0); // … but none opens
    expect(loaded.stoppedAt).toEqual({ block: 0, code: 'KVT_ERR_SEAL_AUTH_FAILED' });
    expect(bob.stats().errors.KVT_ERR_SEAL_AUTH_FAILED).toBeGreaterThanOrEqual(1); // reads run 8 at a time: each one started counts
    // Another server secret under the same key id: same story for Alice's own keys.
    const foreign = await openTier(keyringFromSecret(SECRET_2));
    const other = await loadPrompt(foreign, tokens);
    expect(other.loaded.blocks).toHaveLength(0);
    expect(foreign.stats().errors.KVT_ERR_SEAL_AUTH_FAILED).toBeGreaterThanOrEqual(1);
    expect(await store.get(keyOf(tokens, 0))).not.toBeNull(); // kept: the keyring may be what is wrong
  });

  for (const [where, at] of [
    ['header (nonce)', (n: number) => 14 + 0 * n],
    ['header (key id)', () => 8],
    ['ciphertext', (n: number) => SEAL_HEADER_BYTES + Math.floor(n / 2)],
    ['tag', (n: number) => n - 3],
  ] as const) {
    it(`a flipped bit in the ${where} of block 2 ends the load there`, async () => {
      const tokens = tokensOf(64 * BLOCKS, 13);
      const writer = await openTier(keyringFromSecret(SECRET_1));
      await storePrompt(writer, tokens, 13);
      const key = keyOf(tokens, 2);
      const stored = (await store.get(key))!.slice();
      stored[at(stored.byteLength)] ^= 0x10;
      await store.put(key, stored);
      const reader = await openTier(keyringFromSecret(SECRET_1));
      const { loaded } = await loadPrompt(reader, tokens);
      expect(loaded.blocks.map((b) => b.index)).toEqual([0, 1]);
      expect(loaded.stoppedAt?.block).toBe(2);
      expect(loaded.stoppedAt?.code).toMatch(/^KVT_ERR_SEAL_(AUTH_FAILED|UNKNOWN_KEY)$/);
      expect(reader.stats().errors[loaded.stoppedAt!.code]).toBe(1);
    });
  }

  it('a blob copied to another block key\'s path does not open', async () => {
    const tokens = tokensOf(64 * BLOCKS, 14);
    const writer = await openTier(keyringFromSecret(SECRET_1));
    await storePrompt(writer, tokens, 14);
    await store.put(keyOf(tokens, 1), (await store.get(keyOf(tokens, 0)))!);
    const reader = await openTier(keyringFromSecret(SECRET_1));
    const { loaded } = await loadPrompt(reader, tokens);
    expect(loaded.blocks).toHaveLength(1);
    expect(loaded.stoppedAt).toEqual({ block: 1, code: 'KVT_ERR_SEAL_AUTH_FAILED' });
  });

  it('key rotation: old blocks open with the old id, new writes use the new id; dropping the old id makes them misses', async () => {
    const old = tokensOf(64 * BLOCKS, 15);
    const fresh = tokensOf(64 * BLOCKS, 16);
    const first = await openTier(keyringFromSecret(SECRET_1));
    await storePrompt(first, old, 15);
    const rotated = await openTier(parseKeyringJson(JSON.stringify({ current: 2, keys: { 1: SECRET_1, 2: SECRET_2 } }), 'test'));
    expect((await loadPrompt(rotated, old)).loaded.blocks).toHaveLength(BLOCKS);
    await storePrompt(rotated, fresh, 16);
    for (let b = 0; b < BLOCKS; b++) {
      expect(readSealHeader((await store.get(keyOf(old, b)))!).keyId).toBe(1);
      expect(readSealHeader((await store.get(keyOf(fresh, b)))!).keyId).toBe(2);
    }
    const only2 = await openTier(parseKeyringJson(JSON.stringify({ current: 2, keys: { 2: SECRET_2 } }), 'test'));
    expect((await loadPrompt(only2, fresh)).loaded.blocks.map((b) => Array.from(b.payload))).toEqual(Array.from({ length: BLOCKS }, (_, b) => Array.from(payloadFor(16, b))));
    const stale = await loadPrompt(only2, old);
    expect(stale.loaded.blocks).toHaveLength(0);
    expect(stale.loaded.stoppedAt?.code).toBe('KVT_ERR_SEAL_UNKNOWN_KEY');
  });

  it('sealed blocks are misses with encryption off, and plaintext blocks are misses with it on', async () => {
    const sealedTokens = tokensOf(64 * BLOCKS, 17);
    const plainTokens = tokensOf(64 * BLOCKS, 18);
    await storePrompt(await openTier(keyringFromSecret(SECRET_1)), sealedTokens, 17);
    await storePrompt(await openTier(null), plainTokens, 18);
    expect(looksSealed((await store.get(keyOf(plainTokens, 0)))!)).toBe(false);
    const off = await openTier(null);
    expect((await loadPrompt(off, sealedTokens)).loaded.stoppedAt).toEqual({ block: 0, code: 'KVT_ERR_SEAL_NO_KEYRING' });
    expect((await loadPrompt(off, plainTokens)).loaded.blocks).toHaveLength(BLOCKS);
    const on = await openTier(keyringFromSecret(SECRET_1));
    expect((await loadPrompt(on, plainTokens)).loaded.stoppedAt).toEqual({ block: 0, code: 'KVT_ERR_SEAL_NOT_SEALED' });
    expect((await loadPrompt(on, sealedTokens)).loaded.blocks).toHaveLength(BLOCKS);
  });

  it('large blocks (opened on the seal threads) round-trip, and a tampered one still ends the load', async () => {
    const layout = { layers: 8, kvHeads: 2, headDim: 64, dtype: 'f16' as const, tokensPerBlock: 64 }; // 256 KiB payloads
    const bytes = 8 * 2 * 64 * 2 * 64 * 2;
    const tokens = tokensOf(64 * BLOCKS, 20);
    const writer = await openTier(keyringFromSecret(SECRET_1));
    const namespace = writer.namespace({ modelFingerprint: FINGERPRINT, tenantSalt: 'salt-alice' });
    writer.store({ namespace, tokens, layout, ...scopeOf('alice'), payloads: Array.from({ length: BLOCKS }, (_, b) => payloadFor(20, b, bytes)) });
    await writer.flush();
    const stored = (await store.get(keyOf(tokens, 3)))!.slice();
    stored[SEAL_HEADER_BYTES + 100_000] ^= 2;
    await store.put(keyOf(tokens, 3), stored);
    const sealer = new BlockSealer(keyringFromSecret(SECRET_1), { openThreads: 2 });
    try {
      const reader = await openTier(null, { seal: sealer });
      const { loaded } = await loadPrompt(reader, tokens);
      expect(loaded.blocks.map((b) => Array.from(b.payload))).toEqual([0, 1, 2].map((b) => Array.from(payloadFor(20, b, bytes))));
      expect(loaded.stoppedAt).toEqual({ block: 3, code: 'KVT_ERR_SEAL_AUTH_FAILED' });
    } finally {
      await sealer.close();
    }
  });

  it('the writer\'s own reads (pending writes, hot cache) serve the plaintext it encoded', async () => {
    const tokens = tokensOf(64 * BLOCKS, 19);
    const tier = await openTier(keyringFromSecret(SECRET_1), { hotCacheBytes: 1 << 20 });
    const namespace = tier.namespace({ modelFingerprint: FINGERPRINT, tenantSalt: 'salt-alice' });
    tier.store({ namespace, tokens, layout: LAYOUT, ...scopeOf('alice'), payloads: Array.from({ length: BLOCKS }, (_, b) => payloadFor(19, b)) });
    const during = await tier.load(await tier.lookup(namespace, tokens, scopeOf('alice'))); // may be served from the pending writes
    expect(during.blocks).toHaveLength(BLOCKS);
    await tier.flush();
    const after = await tier.load(await tier.lookup(namespace, tokens, scopeOf('alice'))); // hot cache
    expect(after.blocks.map((b) => Array.from(b.payload))).toEqual(Array.from({ length: BLOCKS }, (_, b) => Array.from(payloadFor(19, b))));
    expect(tier.stats().errors).toEqual({});
    // Stored size counts the envelope.
    expect(tier.stats().bytesWritten).toBe(await sumStoredBytes(tokens));
  });
});

async function sumStoredBytes(tokens: Uint32Array): Promise<number> {
  let sum = 0;
  for (let b = 0; b < BLOCKS; b++) sum += (await store.get(keyOf(tokens, b)))!.byteLength;
  return sum;
}
