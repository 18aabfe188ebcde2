/**
 * The AES-256-GCM envelope on its own: round trip, every way a blob can be
 * wrong (other tenant, flipped bit in header / ciphertext / tag, other block
 * key, unknown key id), nonce uniqueness, keyring rotation and parsing.
 */
import { randomBytes } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import { BlockCodec, errorCodeOf } from '../../../../src/kvtier/index.ts';
import {
  BlockSealer,
  describeSealed,
  keyringFromSecret,
  NonceSource,
  openStored,
  openStoredAsync,
  parseKeyringJson,
  readSealHeader,
  SEAL_HEADER_BYTES,
  SEAL_OVERHEAD_BYTES,
  SEAL_TAG_BYTES,
  SealError,
} from '../../../../src/kvtier/seal/index.ts';
import { LAYOUT, payloadFor, tokensOf } from '../fixtures.ts';

const SECRET_1 = 'a'.repeat(16) + '0123456789abcdef0123456789abcdef';
const SECRET_2 = 'b'.repeat(16) + 'fedcba9876543210fedcba9876543210';
const ALICE = '5f1c0e1a2b3c4d5e6f708192a3b4c5d6';
const BOB = '0a9b8c7d6e5f4e3d2c1b0a9988776655';

const codec = await BlockCodec.create();

function encodedBlock(seed = 1): { bytes: Uint8Array; key: Uint8Array; tokens: Uint32Array } {
  const key = Uint8Array.from(randomBytes(16));
  const tokens = tokensOf(64, seed);
  const bytes = codec.encode({ key, parentKey: new Uint8Array(16), modelFingerprint: 'model-seal-test', tokens, layout: LAYOUT, payload: payloadFor(seed, 0) });
  return { bytes, key, tokens };
}

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(SealError);
    return errorCodeOf(error);
  }
  return 'opened';
}

function contains(haystack: Uint8Array, needle: Uint8Array): boolean {
  return Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength).indexOf(Buffer.from(needle.buffer, needle.byteOffset, needle.byteLength)) !== -1;
}

describe('BlockSealer', () => {
  const sealer = new BlockSealer(keyringFromSecret(SECRET_1));

  it('round trip: the opened bytes are the encoded block, and decode', () => {
    const { bytes, key } = encodedBlock();
    const sealed = sealer.seal(bytes, key, ALICE);
    expect(sealed.byteLength).toBe(bytes.byteLength + SEAL_OVERHEAD_BYTES);
    const opened = sealer.open(sealed, key, ALICE);
    expect(Buffer.from(opened).equals(Buffer.from(bytes))).toBe(true);
    expect(codec.decode(opened).payload).toEqual(payloadFor(1, 0));
    expect(describeSealed(sealed)).toEqual({ algorithm: 'aes-256-gcm', keyId: 1, envelopeVersion: 1 });
    expect(describeSealed(bytes)).toBeNull();
  });

  it('another tenant\'s key does not open it', () => {
    const { bytes, key } = encodedBlock();
    const sealed = sealer.seal(bytes, key, ALICE);
    expect(codeOf(() => sealer.open(sealed, key, BOB))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
    // Another server secret under the same key id and tenant: also refused.
    expect(codeOf(() => new BlockSealer(keyringFromSecret(SECRET_2)).open(sealed, key, ALICE))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
  });

  it('tenants that share a salt (shared keys) share a key', () => {
    const { bytes, key } = encodedBlock();
    const other = new BlockSealer(keyringFromSecret(SECRET_1)); // another process with the same secret
    expect(Buffer.from(other.open(sealer.seal(bytes, key, ALICE), key, ALICE)).equals(Buffer.from(bytes))).toBe(true);
  });

  it('a blob moved under another block key does not open', () => {
    const { bytes, key } = encodedBlock();
    const sealed = sealer.seal(bytes, key, ALICE);
    const otherKey = key.slice();
    otherKey[15] ^= 1;
    expect(codeOf(() => sealer.open(sealed, otherKey, ALICE))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
  });

  it('a flipped bit anywhere (header, ciphertext, tag) is refused, never plaintext', () => {
    const { bytes, key } = encodedBlock();
    const sealed = sealer.seal(bytes, key, ALICE);
    const positions = [
      ...Array.from({ length: SEAL_HEADER_BYTES }, (_, i) => i), // every header byte
      SEAL_HEADER_BYTES, SEAL_HEADER_BYTES + 1000, sealed.byteLength - SEAL_TAG_BYTES - 1, // ciphertext
      ...Array.from({ length: SEAL_TAG_BYTES }, (_, i) => sealed.byteLength - SEAL_TAG_BYTES + i), // every tag byte
    ];
    const codes = new Set<string>();
    for (const at of positions) {
      for (const bit of [0, 7]) {
        const tampered = sealed.slice();
        tampered[at] ^= 1 << bit;
        // Through the load path's entry point: a magic flip makes it "not sealed", refused while encryption is on.
        const code = codeOf(() => openStored(sealer, tampered, key, ALICE));
        expect(code, `byte ${at} bit ${bit}`).not.toBe('opened');
        codes.add(code);
      }
    }
    expect([...codes].sort()).toEqual(['KVT_ERR_SEAL_AUTH_FAILED', 'KVT_ERR_SEAL_MALFORMED', 'KVT_ERR_SEAL_NOT_SEALED', 'KVT_ERR_SEAL_UNKNOWN_KEY']);
    // A truncated blob too.
    expect(codeOf(() => sealer.open(sealed.subarray(0, SEAL_OVERHEAD_BYTES - 1), key, ALICE))).toBe('KVT_ERR_SEAL_MALFORMED');
    expect(codeOf(() => sealer.open(sealed.subarray(0, sealed.byteLength - 1), key, ALICE))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
  });

  it('nothing readable in the stored bytes: no token run, fingerprint or payload run appears', () => {
    const { bytes, key, tokens } = encodedBlock(7);
    const sealed = sealer.seal(bytes, key, ALICE);
    const tokenBytes = new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.byteLength);
    expect(contains(bytes, tokenBytes)).toBe(true); // the check can fail: the plaintext has them
    for (let from = 0; from + 12 <= tokenBytes.length; from += 4) expect(contains(sealed, tokenBytes.subarray(from, from + 12))).toBe(false); // any 3 consecutive tokens
    expect(contains(sealed, new TextEncoder().encode('model-seal-test'))).toBe(false);
    expect(contains(sealed, payloadFor(7, 0).subarray(0, 32))).toBe(false);
    expect(contains(sealed, new TextEncoder().encode('KVTB'))).toBe(false);
  });

  it('openInPlace (the load path) decrypts over the ciphertext: no new buffer; a failed tag leaves zeros, not plaintext', () => {
    const { bytes, key } = encodedBlock(9);
    const sealed = sealer.seal(bytes, key, ALICE);
    const opened = sealer.openInPlace(sealed, key, ALICE);
    expect(opened.buffer).toBe(sealed.buffer);
    expect(opened.byteOffset % 64).toBe(sealed.byteOffset % 64); // the 64-byte header keeps the block's alignment
    expect(Buffer.from(opened).equals(Buffer.from(bytes))).toBe(true);
    expect(codec.decode(opened).payload).toEqual(payloadFor(9, 0));
    const tampered = sealer.seal(bytes, key, ALICE);
    tampered[tampered.byteLength - 1] ^= 1;
    expect(codeOf(() => sealer.openInPlace(tampered, key, ALICE))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
    expect(tampered.subarray(SEAL_HEADER_BYTES, tampered.byteLength - SEAL_TAG_BYTES).every((v) => v === 0)).toBe(true);
  });

  it('plaintext passes only with encryption off; an envelope only with it on', () => {
    const { bytes, key } = encodedBlock();
    const sealed = sealer.seal(bytes, key, ALICE);
    expect(openStored(undefined, bytes, key, ALICE)).toBe(bytes);
    expect(codeOf(() => openStored(undefined, sealed, key, ALICE))).toBe('KVT_ERR_SEAL_NO_KEYRING');
    expect(codeOf(() => openStored(sealer, bytes, key, ALICE))).toBe('KVT_ERR_SEAL_NOT_SEALED');
  });
});

describe('openAsync (large blocks decrypted on threads)', () => {
  it('opens what seal made, refuses tampered or foreign blobs, many at once', async () => {
    const sealer = new BlockSealer(keyringFromSecret(SECRET_1), { openThreads: 2, nativeOpen: false });
    try {
      const key = Uint8Array.from(randomBytes(16));
      const blocks = Array.from({ length: 12 }, (_, i) => Uint8Array.from(randomBytes(512 * 1024 + i)));
      const sealed = blocks.map((b) => sealer.seal(b, key, ALICE));
      const opened = await Promise.all(sealed.map((s) => sealer.openAsync(s, key, ALICE)));
      opened.forEach((plain, i) => expect(Buffer.from(plain).equals(Buffer.from(blocks[i]))).toBe(true));
      const asyncCode = async (run: () => Promise<unknown>) => {
        try {
          await run();
        } catch (error) {
          expect(error).toBeInstanceOf(SealError);
          return errorCodeOf(error);
        }
        return 'opened';
      };
      const tampered = sealed[3].slice();
      tampered[SEAL_HEADER_BYTES + 4096] ^= 1;
      expect(await asyncCode(() => sealer.openAsync(tampered, key, ALICE))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
      expect(await asyncCode(() => sealer.openAsync(sealed[4], key, BOB))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
      const otherKey = key.slice();
      otherKey[0] ^= 0x80;
      expect(await asyncCode(() => sealer.openAsync(sealed[5], otherKey, ALICE))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
      const tag = sealed[6].slice();
      tag[tag.byteLength - 1] ^= 4;
      expect(await asyncCode(() => openStoredAsync(sealer, tag, key, ALICE))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
      expect(await asyncCode(() => openStoredAsync(sealer, blocks[0], key, ALICE))).toBe('KVT_ERR_SEAL_NOT_SEALED');
      // The blobs themselves are untouched (their bytes were copied to the threads).
      expect(Buffer.from(await sealer.openAsync(sealed[3], key, ALICE)).equals(Buffer.from(blocks[3]))).toBe(true);
    } finally {
      await sealer.close();
    }
  });
});

describe.each(['pool', 'caller'] as const)('openAsync natively (one native call in place, on %s)', (nativeOpenOn) => {
  it('opens what seal made in place, many at once; tampered, foreign and other-key blobs are refused and zeroed', async () => {
    const sealer = new BlockSealer(keyringFromSecret(SECRET_1), { nativeOpenOn });
    expect(sealer.openPath).toBe('native');
    expect(sealer.nativeOpenOn).toBe(nativeOpenOn);
    const key = Uint8Array.from(randomBytes(16));
    const blocks = Array.from({ length: 12 }, (_, i) => Uint8Array.from(randomBytes(512 * 1024 + i)));
    const sealed = blocks.map((b) => sealer.seal(b, key, ALICE));
    const reference = sealed.map((s) => sealer.open(s, key, ALICE)); // node:crypto, into fresh buffers
    const opened = await Promise.all(sealed.map((s) => sealer.openAsync(s, key, ALICE)));
    opened.forEach((plain, i) => {
      expect(plain.buffer).toBe(sealed[i].buffer);
      expect(plain.byteOffset % 64).toBe(sealed[i].byteOffset % 64);
      expect(Buffer.from(plain).equals(Buffer.from(blocks[i]))).toBe(true);
      expect(Buffer.from(plain).equals(Buffer.from(reference[i]))).toBe(true);
    });
    const fresh = blocks.map((b) => sealer.seal(b, key, ALICE));
    const refused = async (sealedBlob: Uint8Array, blockKey: Uint8Array, salt: string) => {
      let code = 'opened';
      try {
        await sealer.openAsync(sealedBlob, blockKey, salt);
      } catch (error) {
        expect(error).toBeInstanceOf(SealError);
        code = errorCodeOf(error);
      }
      expect(code).toBe('KVT_ERR_SEAL_AUTH_FAILED');
      expect(sealedBlob.subarray(SEAL_HEADER_BYTES, sealedBlob.byteLength - SEAL_TAG_BYTES).every((v) => v === 0)).toBe(true);
    };
    fresh[3][SEAL_HEADER_BYTES + 4096] ^= 1;
    await refused(fresh[3], key, ALICE);
    await refused(fresh[4], key, BOB);
    const otherKey = key.slice();
    otherKey[0] ^= 0x80;
    await refused(fresh[5], otherKey, ALICE);
    fresh[6][fresh[6].byteLength - 1] ^= 4;
    await refused(fresh[6], key, ALICE);
    expect(codeOf(() => openStored(sealer, blocks[0], key, ALICE))).toBe('KVT_ERR_SEAL_NOT_SEALED');
    await sealer.close();
  });
});

describe('key rotation', () => {
  it('new writes use the new id; old blocks open while the old id is kept, and not after it is dropped', () => {
    const { bytes, key } = encodedBlock();
    const old = new BlockSealer(keyringFromSecret(SECRET_1));
    const sealedOld = old.seal(bytes, key, ALICE);
    const rotated = new BlockSealer(parseKeyringJson(JSON.stringify({ current: 2, keys: { 1: SECRET_1, 2: SECRET_2 } }), 'test keyring'));
    const sealedNew = rotated.seal(bytes, key, ALICE);
    expect(readSealHeader(sealedOld).keyId).toBe(1);
    expect(readSealHeader(sealedNew).keyId).toBe(2);
    expect(Buffer.from(rotated.open(sealedOld, key, ALICE)).equals(Buffer.from(bytes))).toBe(true);
    expect(Buffer.from(rotated.open(sealedNew, key, ALICE)).equals(Buffer.from(bytes))).toBe(true);
    const dropped = new BlockSealer(parseKeyringJson(JSON.stringify({ current: 2, keys: { 2: SECRET_2 } }), 'test keyring'));
    expect(codeOf(() => dropped.open(sealedOld, key, ALICE))).toBe('KVT_ERR_SEAL_UNKNOWN_KEY');
    expect(Buffer.from(dropped.open(sealedNew, key, ALICE)).equals(Buffer.from(bytes))).toBe(true);
    // The old sealer cannot open what the new id sealed.
    expect(codeOf(() => old.open(sealedNew, key, ALICE))).toBe('KVT_ERR_SEAL_UNKNOWN_KEY');
  });

  it('keyrings that cannot work are refused with a reason', () => {
    const bad = (text: string) => codeOf(() => parseKeyringJson(text, 'k.json'));
    expect(bad('{')).toBe('KVT_ERR_SEAL_BAD_CONFIG');
    expect(bad(JSON.stringify({ current: 3, keys: { 1: SECRET_1 } }))).toBe('KVT_ERR_SEAL_BAD_CONFIG');
    expect(bad(JSON.stringify({ current: 1, keys: { 1: 'short' } }))).toBe('KVT_ERR_SEAL_BAD_CONFIG');
    expect(bad(JSON.stringify({ current: 0, keys: { 0: SECRET_1 } }))).toBe('KVT_ERR_SEAL_BAD_CONFIG');
    expect(bad(JSON.stringify({ current: 1, keys: {} }))).toBe('KVT_ERR_SEAL_BAD_CONFIG');
    expect(codeOf(() => keyringFromSecret('too short'))).toBe('KVT_ERR_SEAL_BAD_CONFIG');
  });
});

describe('nonces', () => {
  it('10^6 sealed blocks carry 10^6 distinct nonces', () => {
    const sealer = new BlockSealer(keyringFromSecret(SECRET_1));
    const key = new Uint8Array(16);
    const plain = new Uint8Array(16);
    const seen = new Set<string>();
    const N = 1_000_000;
    for (let i = 0; i < N; i++) {
      const sealed = sealer.seal(plain, key, ALICE);
      seen.add(Buffer.from(sealed.buffer, sealed.byteOffset + 12, 12).toString('latin1'));
    }
    expect(seen.size).toBe(N);
  }, 300_000);

  it('the counter never wraps onto an old nonce: a fresh random prefix is drawn instead', () => {
    const source = new NonceSource(0xffff_fffe);
    const a = source.take();
    const b = source.take();
    const c = source.take(); // counter would wrap here
    expect(source.prefixDraws).toBe(2);
    expect(Buffer.from(a.subarray(0, 8)).equals(Buffer.from(b.subarray(0, 8)))).toBe(true);
    expect(Buffer.from(c.subarray(0, 8)).equals(Buffer.from(a.subarray(0, 8)))).toBe(false);
    expect(Array.from(c.subarray(8))).toEqual([0, 0, 0, 0]);
    expect(new Set([a, b, c].map((n) => Buffer.from(n).toString('hex'))).size).toBe(3);
  });

  it('two sealers (two processes) draw different prefixes', () => {
    const prefixes = new Set(Array.from({ length: 64 }, () => Buffer.from(new NonceSource().take().subarray(0, 8)).toString('hex')));
    expect(prefixes.size).toBe(64);
  });
});
