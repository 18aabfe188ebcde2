/**
 * aesGcmReadOpen (native/src/aes-gcm-read-napi.cc): a sealed blob read from a
 * file and decrypted piece by piece as it lands, against its reference — the
 * file's bytes opened by node:crypto. Files whose length puts the header, a
 * 16-byte block or the tag across the 64 KiB read pieces, a 768 KiB block
 * file and 1 MiB; a prefix that does not match leaves the bytes as stored
 * (2); a flipped ciphertext, header or tag bit, or another AAD suffix, is 0
 * with the ciphertext range zeroed; a file shorter than the buffer rejects
 * ESHORTREAD. Every case on both ciphers (VAES at ISA avx512, OpenSSL at avx2).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadAddon } from '../../native/load-addon.ts';

const addon = loadAddon();
const bestIsa = addon.info().isasAvailable.at(-1)!;
const isas = ['avx512', 'avx2'].filter((isa) => addon.info().isasAvailable.includes(isa));
const HEADER = 64;
const NONCE_AT = 12;
const PREFIX = 12;

const dir = mkdtempSync(join(tmpdir(), 'kvt-aes-read-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** header (magic-like prefix, nonce, random reserved bytes) ‖ ciphertext ‖ tag, AAD = header ‖ suffix. */
function envelope(plain: Uint8Array, key: Uint8Array, suffix: Uint8Array): Uint8Array {
  const header = new Uint8Array(randomBytes(HEADER));
  header.set([0x4b, 0x56, 0x54, 0x53, 1, 1, 64, 0, 7, 0, 0, 0], 0);
  const cipher = createCipheriv('aes-256-gcm', key, header.subarray(NONCE_AT, NONCE_AT + 12), { authTagLength: 16 });
  cipher.setAAD(Buffer.concat([header, suffix]));
  const body = Buffer.concat([cipher.update(plain), cipher.final()]);
  return new Uint8Array(Buffer.concat([header, body, cipher.getAuthTag()]));
}

function referenceOpen(blob: Uint8Array, key: Uint8Array, suffix: Uint8Array): Uint8Array | null {
  const decipher = createDecipheriv('aes-256-gcm', key, blob.subarray(NONCE_AT, NONCE_AT + 12), { authTagLength: 16 });
  decipher.setAAD(Buffer.concat([blob.subarray(0, HEADER), suffix]));
  decipher.setAuthTag(blob.subarray(blob.byteLength - 16));
  const plain = decipher.update(blob.subarray(HEADER, blob.byteLength - 16));
  try {
    decipher.final();
  } catch {
    return null;
  }
  return new Uint8Array(plain);
}

let files = 0;
/** Writes `bytes` to a fresh file, runs `body` with it open, closes it. */
async function withFile<T>(bytes: Uint8Array, body: (fd: number) => Promise<T>): Promise<T> {
  const path = join(dir, `blob-${files++}`);
  writeFileSync(path, bytes);
  const fd = openSync(path, 'r');
  try {
    return await body(fd);
  } finally {
    closeSync(fd);
  }
}

describe.each(isas)('aesGcmReadOpen == fs read + node:crypto open (ISA %s)', (isa) => {
  const key = new Uint8Array(randomBytes(32));
  const suffix = new Uint8Array(randomBytes(16));
  beforeAll(() => addon.setIsa(isa));
  afterAll(() => addon.setIsa(bestIsa));

  const readOpen = (fd: number, data: Uint8Array, prefix: Uint8Array, k: Uint8Array = key, s: Uint8Array = suffix) => addon.aesGcmReadOpen(fd, data, k, prefix, NONCE_AT, HEADER, s);

  it('opens as node:crypto does on file lengths across the 64 KiB read pieces, 768 KiB and 1 MiB', async () => {
    const around = (n: number) => [n - 17, n - 16, n - 15, n - 1, n, n + 1, n + 15, n + 16, n + 17];
    const fileLengths = [HEADER + 16, HEADER + 17, HEADER + 31, HEADER + 32, HEADER + 33, HEADER + 16 + 256, ...around(64 * 1024), ...around(2 * 64 * 1024), 786_432 + 128 + 80, (1 << 20) + 5];
    for (const fileLength of fileLengths) {
      const plain = new Uint8Array(randomBytes(fileLength - HEADER - 16));
      const blob = envelope(plain, key, suffix);
      const data = new Uint8Array(blob.byteLength + 3).subarray(3); // an unaligned view
      const result = await withFile(blob, (fd) => readOpen(fd, data, blob.subarray(0, PREFIX)));
      expect(result, `${fileLength}`).toBe(1);
      expect(Buffer.from(data.subarray(HEADER, data.byteLength - 16)).equals(Buffer.from(referenceOpen(blob, key, suffix)!)), `${fileLength}`).toBe(true);
      expect(Buffer.from(data.subarray(0, HEADER)).equals(Buffer.from(blob.subarray(0, HEADER)))).toBe(true);
    }
  });

  it('leaves the file as stored when the prefix differs or the file is shorter than header + tag (2)', async () => {
    const blob = envelope(new Uint8Array(randomBytes(100_000)), key, suffix);
    const otherKeyId = blob.slice(0, PREFIX);
    otherKeyId[8] = 8;
    const data = new Uint8Array(blob.byteLength);
    expect(await withFile(blob, (fd) => readOpen(fd, data, otherKeyId))).toBe(2);
    expect(Buffer.from(data).equals(Buffer.from(blob))).toBe(true);
    const short = blob.slice(0, HEADER + 15);
    const shortData = new Uint8Array(short.byteLength);
    expect(await withFile(short, (fd) => readOpen(fd, shortData, blob.subarray(0, PREFIX)))).toBe(2);
    expect(Buffer.from(shortData).equals(Buffer.from(short))).toBe(true);
  });

  it('refuses a flipped ciphertext, header or tag bit and another AAD suffix (0), ciphertext range zeroed', async () => {
    const blob = envelope(new Uint8Array(randomBytes(3 * 64 * 1024 + 5)).fill(0x5a, 0, 4096), key, suffix);
    const flipped = (i: number) => {
      const copy = blob.slice();
      copy[i] ^= 0x01;
      return copy;
    };
    const cases: Array<[string, Uint8Array, Uint8Array]> = [
      ...[HEADER, 65_535, 65_536, 2 * 65_536 + 7, blob.byteLength - 17].map((i): [string, Uint8Array, Uint8Array] => [`ciphertext[${i}]`, flipped(i), suffix]),
      ['nonce', flipped(NONCE_AT + 3), suffix],
      ['reserved header byte', flipped(40), suffix],
      ['tag', flipped(blob.byteLength - 1), suffix],
      ['aad suffix', blob, suffix.map((b, i) => (i === 0 ? b ^ 1 : b))],
    ];
    for (const [what, file, s] of cases) {
      expect(referenceOpen(file, key, s), what).toBeNull();
      const data = new Uint8Array(file.byteLength);
      expect(await withFile(file, (fd) => readOpen(fd, data, blob.subarray(0, PREFIX), key, s)), what).toBe(0);
      expect(data.subarray(HEADER, data.byteLength - 16).every((b) => b === 0), `${what}: zeroed`).toBe(true);
    }
  });

  it('rejects a file shorter than the buffer (ESHORTREAD) and a closed fd, and bad arguments (KVT_ERR_NATIVE_ARG)', async () => {
    const blob = envelope(new Uint8Array(randomBytes(1000)), key, suffix);
    await expect(withFile(blob, (fd) => readOpen(fd, new Uint8Array(blob.byteLength + 10), blob.subarray(0, PREFIX)))).rejects.toMatchObject({ code: 'ESHORTREAD' });
    const path = join(dir, 'closed');
    writeFileSync(path, blob);
    const fd = openSync(path, 'r');
    closeSync(fd);
    await expect(readOpen(fd, new Uint8Array(blob.byteLength), blob.subarray(0, PREFIX))).rejects.toMatchObject({ code: 'EBADF' });
    expect(() => addon.aesGcmReadOpen(-1, new Uint8Array(10), key, new Uint8Array(0), 12, 64, suffix)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_ARG' }));
    expect(() => addon.aesGcmReadOpen(3, new Uint8Array(10), key, new Uint8Array(0), 60, 64, suffix)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_ARG' }));
    expect(() => addon.aesGcmReadOpen(3, new Uint8Array(10), key.subarray(1), new Uint8Array(0), 12, 64, suffix)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_ARG' }));
  });
});
