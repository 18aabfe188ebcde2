import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSyntheticModel, fingerprintSidecarPath, modelFingerprint, readGguf } from '../../inference-core/index.ts';

let dataDir: string;
let file: string;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-fp-'));
  file = ensureSyntheticModel('tiny', { dataDir, weightType: 'f16', progress: null });
});
afterAll(() => {
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('modelFingerprint', () => {
  it('is 32 hex chars and stable across calls and re-reads', async () => {
    const a = await modelFingerprint(readGguf(file), { kvDtype: 'f16', cache: false });
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(await modelFingerprint(readGguf(file), { kvDtype: 'f16', cache: false })).toBe(a);
    expect(await modelFingerprint(readGguf(file), { kvDtype: 'f16' })).toBe(a);
    expect(await modelFingerprint(readGguf(file), { kvDtype: 'f16' })).toBe(a);
  });

  it('changes with the KV dtype, one weight byte, the architecture or the seed', async () => {
    const base = await modelFingerprint(readGguf(file), { kvDtype: 'f16', cache: false });
    expect(await modelFingerprint(readGguf(file), { kvDtype: 'f32', cache: false })).not.toBe(base);

    const copy = path.join(dataDir, 'flipped.gguf');
    const bytes = fs.readFileSync(file);
    const g = readGguf(file);
    const t = g.tensor('blk.1.ffn_down.weight');
    bytes[t.fileOffset + 1234] ^= 0x01;
    fs.writeFileSync(copy, bytes);
    expect(await modelFingerprint(readGguf(copy), { kvDtype: 'f16', cache: false })).not.toBe(base);

    const qwen = ensureSyntheticModel('tiny', { dataDir, weightType: 'f16', arch: 'qwen2', progress: null });
    expect(await modelFingerprint(readGguf(qwen), { kvDtype: 'f16', cache: false })).not.toBe(base);
    const seeded = ensureSyntheticModel('tiny', { dataDir, weightType: 'f16', seed: 7, progress: null });
    expect(await modelFingerprint(readGguf(seeded), { kvDtype: 'f16', cache: false })).not.toBe(base);
  });

  it('ignores metadata that does not change the KV (the tokenizer template)', async () => {
    // Same weights and dims, different pre-tokenizer: the KV for a given token sequence is the same.
    const a = await modelFingerprint(readGguf(file), { kvDtype: 'f16', cache: false });
    const other = ensureSyntheticModel('tiny', { dataDir, weightType: 'f16', pre: 'deepseek-v3', progress: null });
    const b = await modelFingerprint(readGguf(other), { kvDtype: 'f16', cache: false });
    // The vocab differs in training, so token_embd rows differ only if the vocab size differs; both are 512.
    expect(readGguf(other).tensor('token_embd.weight').dims).toEqual(readGguf(file).tensor('token_embd.weight').dims);
    expect(b).toBe(a);
  });

  it('caches the weights hash in a sidecar keyed by size and mtime', async () => {
    const copy = path.join(dataDir, 'cached.gguf');
    fs.copyFileSync(file, copy);
    const sidecar = fingerprintSidecarPath(copy);
    const real = await modelFingerprint(readGguf(copy), { kvDtype: 'f16' });
    const body = JSON.parse(fs.readFileSync(sidecar, 'utf8'));
    expect(body.size).toBe(fs.statSync(copy).size);
    expect(body.weightsHash).toMatch(/^[0-9a-f]{32}$/);

    // A doctored sidecar with matching size+mtime is trusted (proves the cache is read) …
    fs.writeFileSync(sidecar, JSON.stringify({ ...body, weightsHash: '0'.repeat(32) }));
    expect(await modelFingerprint(readGguf(copy), { kvDtype: 'f16' })).not.toBe(real);
    // … and a touched file (new mtime) is rehashed and the sidecar rewritten.
    const later = new Date(Date.now() + 5000);
    fs.utimesSync(copy, later, later);
    expect(await modelFingerprint(readGguf(copy), { kvDtype: 'f16' })).toBe(real);
    expect(JSON.parse(fs.readFileSync(sidecar, 'utf8')).weightsHash).toBe(body.weightsHash);
  });

  it('rejects an unknown KV dtype', async () => {
    await expect(modelFingerprint(readGguf(file), { kvDtype: 'q4' as never })).rejects.toThrow(/KVT_ERR_FINGERPRINT_KV_DTYPE/);
  });
});
