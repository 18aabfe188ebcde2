import xxhash from 'xxhash-wasm';
import { describe, expect, it } from 'vitest';

import { hexToKeyBytes, KEY_BYTES, PrefixHasher, type Hash128 } from '../../../src/kvtier/index.ts';
import { tokensOf } from './fixtures.ts';

const spec = { modelFingerprint: 'llama-test-f16', tenantSalt: 'tenant-a' };

describe('PrefixHasher', () => {
  it('is deterministic across instances and gives 32-hex keys', async () => {
    const a = await PrefixHasher.create();
    const b = await PrefixHasher.create();
    const tokens = tokensOf(64 * 5 + 17, 1);
    const ns = a.namespaceKeyBytes(spec);
    expect(a.namespaceKey(spec)).toMatch(/^[0-9a-f]{32}$/);
    expect(b.namespaceKey(spec)).toBe(a.namespaceKey(spec));
    const chainA = a.chain(ns, tokens);
    const chainB = b.chain(b.namespaceKey(spec), tokens);
    expect(chainA.blockCount).toBe(5); // the 17-token tail gets no key
    for (let i = 0; i < 5; i++) {
      expect(chainA.keyHex(i)).toMatch(/^[0-9a-f]{32}$/);
      expect(chainB.keyHex(i)).toBe(chainA.keyHex(i));
    }
  });

  it('matches the definition k_i = H(k_{i-1} ‖ tokens_i) with H = two seeded xxh64 (fast path = reference)', async () => {
    const hasher = await PrefixHasher.create();
    const api = await xxhash();
    const tokens = tokensOf(64 * 40, 2);
    const ns = hasher.namespaceKeyBytes(spec);
    const h = (bytes: Uint8Array): Uint8Array => {
      const out = new Uint8Array(16);
      const view = new DataView(out.buffer);
      view.setBigUint64(0, api.h64Raw(bytes, 0x6b76746965722d31n), false);
      view.setBigUint64(8, api.h64Raw(bytes, 0x6b76746965722d32n), false);
      return out;
    };
    let parent = h(ns);
    const chain = hasher.chain(ns, tokens);
    expect(Buffer.from(chain.rootKey).equals(Buffer.from(parent))).toBe(true);
    for (let i = 0; i < 40; i++) {
      const input = new Uint8Array(16 + 256);
      input.set(parent, 0);
      input.set(new Uint8Array(tokens.buffer, i * 256, 256), 16);
      const key = h(input);
      expect(chain.keyHex(i)).toBe(Buffer.from(key).toString('hex'));
      expect(Buffer.from(chain.parentKeyBytes(i)).equals(Buffer.from(parent))).toBe(true);
      parent = key;
    }
  });

  it('the addon\'s chain, the wasm chain and the per-block path give the same keys (block sizes 1 to 512, views at an offset)', async () => {
    const native = await PrefixHasher.create({ blockTokens: 64 });
    expect(native.chainKind).toBe('native');
    const api = await xxhash();
    const sameHash: Hash128 = (input, out, offset) => {
      const view = new DataView(out.buffer, out.byteOffset + offset, 16);
      view.setBigUint64(0, api.h64Raw(input, 0x6b76746965722d31n), false);
      view.setBigUint64(8, api.h64Raw(input, 0x6b76746965722d32n), false);
    };
    const previous = process.env.KVTIER_PREFIX_HASH;
    process.env.KVTIER_PREFIX_HASH = 'wasm';
    try {
      for (const blockTokens of [1, 7, 64, 512]) {
        const hashers = [
          await PrefixHasher.create({ blockTokens }),
          await PrefixHasher.create({ blockTokens, hash128: sameHash }),
        ];
        delete process.env.KVTIER_PREFIX_HASH;
        hashers.push(await PrefixHasher.create({ blockTokens }));
        process.env.KVTIER_PREFIX_HASH = 'wasm';
        expect(hashers.map((hasher) => hasher.chainKind)).toEqual(['wasm', 'generic', 'native']);
        const backing = tokensOf(blockTokens * 9 + 5, blockTokens);
        for (const tokens of [backing, backing.subarray(3)]) {
          const ns = hashers[0].namespaceKeyBytes(spec);
          const [wasm, generic, fromAddon] = hashers.map((hasher) => hasher.chain(ns, tokens));
          expect(fromAddon.blockCount).toBe(Math.floor(tokens.length / blockTokens));
          expect(Buffer.from(fromAddon.keys).equals(Buffer.from(wasm.keys))).toBe(true);
          expect(Buffer.from(generic.keys).equals(Buffer.from(wasm.keys))).toBe(true);
          expect(hashers[2].chain(ns, tokens, 2).keys).toEqual(wasm.keys.subarray(0, 32));
        }
      }
    } finally {
      if (previous === undefined) delete process.env.KVTIER_PREFIX_HASH;
      else process.env.KVTIER_PREFIX_HASH = previous;
    }
  });

  it('has prefix property: a longer prompt extends the same chain; a changed token changes every later key only', async () => {
    const hasher = await PrefixHasher.create();
    const ns = hasher.namespaceKeyBytes(spec);
    const long = tokensOf(64 * 10, 3);
    const short = long.subarray(0, 64 * 4 + 5);
    const longChain = hasher.chain(ns, long);
    const shortChain = hasher.chain(ns, short);
    for (let i = 0; i < 4; i++) expect(shortChain.keyHex(i)).toBe(longChain.keyHex(i));
    const changed = long.slice();
    changed[64 * 6 + 3] ^= 1;
    const changedChain = hasher.chain(ns, changed);
    for (let i = 0; i < 6; i++) expect(changedChain.keyHex(i)).toBe(longChain.keyHex(i));
    for (let i = 6; i < 10; i++) expect(changedChain.keyHex(i)).not.toBe(longChain.keyHex(i));
  });

  it('works on a subarray view with a non-zero byteOffset without copying', async () => {
    const hasher = await PrefixHasher.create();
    const ns = hasher.namespaceKeyBytes(spec);
    const backing = tokensOf(64 * 3 + 7, 4);
    const view = backing.subarray(7);
    const copy = view.slice();
    expect(hasher.chain(ns, view).keys).toEqual(hasher.chain(ns, copy).keys);
  });

  it('separates namespaces: fingerprint, salt and format version all change every key', async () => {
    const hasher = await PrefixHasher.create();
    const tokens = tokensOf(128, 5);
    const base = hasher.chain(hasher.namespaceKeyBytes(spec), tokens).keyHex(0);
    for (const other of [
      { ...spec, modelFingerprint: 'llama-test-q8' },
      { ...spec, tenantSalt: 'tenant-b' },
      { ...spec, formatVersion: 2 },
      // Length-prefixed fields: moving a character between them is another namespace.
      { modelFingerprint: 'llama-test-f16t', tenantSalt: 'enant-a' },
    ]) {
      expect(hasher.chain(hasher.namespaceKeyBytes(other), tokens).keyHex(0)).not.toBe(base);
    }
  });

  it('honours blockTokens and an injected hash (used to force collisions)', async () => {
    const weak: Hash128 = (_input, out, offset) => out.fill(7, offset, offset + KEY_BYTES);
    const hasher = await PrefixHasher.create({ blockTokens: 16, hash128: weak });
    const chain = hasher.chain(hasher.namespaceKeyBytes(spec), tokensOf(50, 6));
    expect(chain.blockCount).toBe(3);
    expect(chain.keyHex(0)).toBe('07'.repeat(16));
    expect(chain.keyHex(2)).toBe(chain.keyHex(0));
  });

  it('rejects bad input with typed errors', async () => {
    const hasher = await PrefixHasher.create();
    expect(() => hasher.namespaceKeyBytes({ modelFingerprint: '', tenantSalt: 'x' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_HASH_BAD_INPUT' }));
    expect(() => hasher.chain('zz', new Uint32Array(64))).toThrow(expect.objectContaining({ code: 'KVT_ERR_HASH_BAD_INPUT' }));
    expect(() => hasher.chain(hasher.namespaceKeyBytes(spec), [1, 2, 3] as unknown as Uint32Array)).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_HASH_BAD_INPUT' }),
    );
    await expect(PrefixHasher.create({ blockTokens: 0 })).rejects.toMatchObject({ code: 'KVT_ERR_HASH_BAD_INPUT' });
  });

  it('hexToKeyBytes: the 16 bytes of a lowercase key in a buffer of their own; anything else is KVT_ERR_HASH_BAD_INPUT', () => {
    for (let i = 0; i < 2000; i++) {
      const bytes = Uint8Array.from({ length: KEY_BYTES }, (_, j) => (i * 37 + j * 101) & 0xff);
      const key = Buffer.from(bytes).toString('hex');
      const out = hexToKeyBytes(key);
      expect(out).toEqual(bytes);
      expect(out.byteOffset).toBe(0);
      expect(out.buffer.byteLength).toBe(KEY_BYTES);
    }
    const good = '0123456789abcdef'.repeat(2);
    for (const bad of [good.toUpperCase(), good.slice(1), `${good}0`, `${good.slice(1)}g`, `${good.slice(1)}:`, `${good.slice(1)}\u00b0`, `${good.slice(1)}\u0130`, '', 42 as unknown as string]) {
      expect(() => hexToKeyBytes(bad), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'KVT_ERR_HASH_BAD_INPUT' }));
    }
  });
});
