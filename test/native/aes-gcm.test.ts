/**
 * The native AES-256-GCM open in place (native/src/aes-gcm-napi.cc) against
 * its reference, node:crypto's decipher: the same plaintext for lengths
 * around the 16-byte block, the 256-byte VAES loop turn, the 64 KiB piece and
 * at 1 MiB, at unaligned offsets, with and without AAD; and the same refusals
 * — a flipped ciphertext/AAD/tag bit or another key is `false` with the
 * buffer zeroed, never plaintext. Many opens in flight at once on libuv's
 * pool each get their own result. Every case runs on both implementations
 * the CPU allows: the 512-bit VAES code (kernel ISA avx512) and OpenSSL's EVP
 * (ISA forced to avx2), so each is checked against node:crypto.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadAddon } from '../../native/load-addon.ts';

function seal(plain: Uint8Array, key: Uint8Array, nonce: Uint8Array, aad: Uint8Array): { ciphertext: Uint8Array; tag: Uint8Array } {
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: 16 });
  if (aad.byteLength > 0) cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plain), cipher.final()]);
  return { ciphertext: new Uint8Array(ciphertext), tag: new Uint8Array(cipher.getAuthTag()) };
}

function referenceOpen(ciphertext: Uint8Array, key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, tag: Uint8Array): Uint8Array | null {
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: 16 });
  if (aad.byteLength > 0) decipher.setAAD(aad);
  decipher.setAuthTag(tag);
  const plain = decipher.update(ciphertext);
  try {
    decipher.final();
  } catch {
    return null;
  }
  return new Uint8Array(plain);
}

/** `bytes` copied to `offset` bytes into a fresh buffer (an unaligned view). */
function at(bytes: Uint8Array, offset: number): Uint8Array {
  const out = new Uint8Array(bytes.byteLength + offset).subarray(offset);
  out.set(bytes);
  return out;
}

const addon = loadAddon();
const bestIsa = addon.info().isasAvailable.at(-1)!;
// The VAES path where this CPU has it, and OpenSSL's (ISA below avx512) where the CPU runs avx2.
const paths: Array<{ isa: string; path: 'vaes-avx512' | 'openssl' }> = [];
for (const isa of ['avx512', 'avx2']) {
  if (!addon.info().isasAvailable.includes(isa)) continue;
  addon.setIsa(isa);
  paths.push({ isa, path: addon.aesGcmOpenPath() });
}
addon.setIsa(bestIsa);

describe.each(paths)('native aesGcmOpenInPlace == node:crypto (ISA $isa: $path)', ({ isa }) => {
  const key = new Uint8Array(randomBytes(32));
  const nonce = new Uint8Array(randomBytes(12));
  beforeAll(() => addon.setIsa(isa));
  afterAll(() => addon.setIsa(bestIsa));

  it('gives the same plaintext on lengths 0..70, around 256 B, 512 B, 4 KiB, 64 KiB, 192 KiB, at 768 KiB and 1 MiB ± 5, offsets 0..3, with and without AAD', async () => {
    // Around the 16-byte block, the 256-byte loop turn (± a block, ± a byte), the 64 KiB piece, a 768 KiB block file, 1 MiB.
    const around = (n: number) => [n - 17, n - 16, n - 1, n, n + 1, n + 15, n + 16, n + 17];
    const lengths = [
      ...Array.from({ length: 71 }, (_, i) => i),
      ...around(256), ...around(512), ...around(4096), ...around(64 * 1024), ...around(3 * 64 * 1024),
      786_432 + 128, (1 << 20) - 5, 1 << 20, (1 << 20) + 5,
    ];
    for (const length of lengths) {
      const plain = new Uint8Array(randomBytes(length));
      for (const aad of [new Uint8Array(0), new Uint8Array(randomBytes(80))]) {
        const { ciphertext, tag } = seal(plain, key, nonce, aad);
        const offset = length % 4;
        const data = at(ciphertext, offset);
        expect(await addon.aesGcmOpenInPlace(data, key, nonce, aad, tag)).toBe(true);
        expect(Buffer.from(data).equals(Buffer.from(referenceOpen(ciphertext, key, nonce, aad, tag)!))).toBe(true);
        expect(Buffer.from(data).equals(Buffer.from(plain))).toBe(true);
      }
    }
  });

  it('refuses what node:crypto refuses — flipped ciphertext, AAD or tag bit, another key — and zeroes the buffer', async () => {
    const plain = new Uint8Array(randomBytes(64 * 1024 + 3)).fill(0x5a, 0, 1024);
    const aad = new Uint8Array(randomBytes(80));
    const { ciphertext, tag } = seal(plain, key, nonce, aad);
    const flip = (bytes: Uint8Array, i: number) => {
      const copy = bytes.slice();
      copy[i] ^= 0x01;
      return copy;
    };
    const cases: Array<[string, Uint8Array, Uint8Array, Uint8Array, Uint8Array]> = [
      // First byte, ends of the first 256-byte turn, inside a turn, the 16-byte tail blocks and the last (short) one.
      ...[0, 255, 256, 40_000, 65_535, 65_536, 65_538].map((i): [string, Uint8Array, Uint8Array, Uint8Array, Uint8Array] => [`ciphertext[${i}]`, flip(ciphertext, i), key, aad, tag]),
      ['aad', ciphertext, key, flip(aad, 79), tag],
      ['tag', ciphertext, key, aad, flip(tag, 0)],
      ['tag[15]', ciphertext, key, aad, flip(tag, 15)],
      ['key', ciphertext, new Uint8Array(randomBytes(32)), aad, tag],
    ];
    for (const [what, c, k, a, t] of cases) {
      expect(referenceOpen(c, k, nonce, a, t), what).toBeNull();
      const data = c.slice();
      expect(await addon.aesGcmOpenInPlace(data, k, nonce, a, t), what).toBe(false);
      expect(data.every((b) => b === 0), `${what}: buffer zeroed`).toBe(true);
    }
    const otherNonce = nonce.slice();
    otherNonce[11] ^= 0x01;
    const data = ciphertext.slice();
    expect(await addon.aesGcmOpenInPlace(data, key, otherNonce, aad, tag), 'another nonce').toBe(false);
    expect(data.every((b) => b === 0), 'another nonce: buffer zeroed').toBe(true);
  });

  it('runs many opens at once, each on its own buffer, each result its own', async () => {
    const blocks = Array.from({ length: 24 }, (_, i) => new Uint8Array(randomBytes(200_000 + i * 1000)));
    const sealed = blocks.map((plain) => seal(plain, key, nonce, new Uint8Array(0)));
    const bad = 7;
    sealed[bad].tag[3] ^= 0x80;
    const data = sealed.map((s) => s.ciphertext.slice());
    const results = await Promise.all(data.map((d, i) => addon.aesGcmOpenInPlace(d, key, nonce, new Uint8Array(0), sealed[i].tag)));
    results.forEach((ok, i) => {
      expect(ok).toBe(i !== bad);
      if (i !== bad) expect(Buffer.from(data[i]).equals(Buffer.from(blocks[i]))).toBe(true);
    });
  });

  it('aesGcmOpenInPlaceSync: the same plaintext on the calling thread, and the same refusal (false, zeroed)', () => {
    for (const length of [0, 15, 16, 255, 256, 257, 64 * 1024 + 3, 786_432 + 128]) {
      const plain = new Uint8Array(randomBytes(length));
      const aad = new Uint8Array(randomBytes(80));
      const { ciphertext, tag } = seal(plain, key, nonce, aad);
      const data = at(ciphertext, length % 4);
      expect(addon.aesGcmOpenInPlaceSync(data, key, nonce, aad, tag), `${length}`).toBe(true);
      expect(Buffer.from(data).equals(Buffer.from(plain)), `${length}`).toBe(true);
      if (length === 0) continue;
      const tampered = ciphertext.slice();
      tampered[length - 1] ^= 0x01;
      expect(addon.aesGcmOpenInPlaceSync(tampered, key, nonce, aad, tag), `${length} tampered`).toBe(false);
      expect(tampered.every((b) => b === 0), `${length} tampered: zeroed`).toBe(true);
    }
    expect(() => addon.aesGcmOpenInPlaceSync(new Uint8Array(16), key, nonce, new Uint8Array(0), new Uint8Array(15))).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_ARG' }));
  });

  it('refuses wrong argument shapes with KVT_ERR_NATIVE_ARG', () => {
    expect(() => addon.aesGcmOpenInPlace(new Uint8Array(16), new Uint8Array(16), nonce, new Uint8Array(0), new Uint8Array(16))).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_NATIVE_ARG' }),
    );
  });
});
