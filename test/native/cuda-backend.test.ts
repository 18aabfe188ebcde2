// Device selection and the TS wrapper of the optional CUDA addon.
// Without the addon or without a GPU the relevant parts skip, saying why.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

import {
  CudaBackend,
  CudaBackendError,
  CudaContext,
  CudaDtype,
  RopeMode,
  cudaAddonPath,
  cudaAvailability,
  resolveDevice,
  type CudaAvailability,
} from '../../native/cuda/index.ts';

/** Deterministic uniform [-scale, scale) values. */
function lcg(seed: number): (n: number, scale: number) => Float32Array {
  let state = seed >>> 0;
  return (n, scale) =>
    Float32Array.from({ length: n }, () => {
      state = (state * 1103515245 + 12345) >>> 0;
      return ((state / 2 ** 32) * 2 - 1) * scale;
    });
}

const none: CudaAvailability = { addon: null, devices: 0, reason: 'the CUDA addon is not built (test)' };

describe('resolveDevice (KVTIER_DEVICE)', () => {
  it('cpu never asks for CUDA', () => {
    let asked = false;
    const r = resolveDevice('cpu', () => {
      asked = true;
      return none;
    });
    expect(r.device).toBe('cpu');
    expect(asked).toBe(false);
  });

  it('auto falls back to cpu and keeps the reason', () => {
    expect(resolveDevice('auto', () => none)).toEqual({ device: 'cpu', reason: none.reason });
    expect(resolveDevice(undefined, () => none).device).toBe('cpu');
  });

  it('auto picks cuda only with an addon and a device', () => {
    const addon = {} as NonNullable<CudaAvailability['addon']>;
    expect(resolveDevice('auto', () => ({ addon, devices: 1, reason: '' })).device).toBe('cuda');
    expect(resolveDevice('auto', () => ({ addon, devices: 0, reason: 'no usable CUDA device: x' })).device).toBe('cpu');
  });

  it('cuda without CUDA is a typed error that says why', () => {
    try {
      resolveDevice('cuda', () => none);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(CudaBackendError);
      expect((err as CudaBackendError).code).toBe('KVT_ERR_NATIVE_NO_CUDA');
      expect((err as Error).message).toContain(none.reason);
    }
  });

  it('an unknown device is KVT_ERR_NATIVE_DEVICE', () => {
    expect(() => resolveDevice('gpu', () => none)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_DEVICE' }));
  });
});

const built = existsSync(cudaAddonPath);
const availability = cudaAvailability();
const gpu = availability.devices > 0;
const builtSkip = built ? '' : ` [skipped: ${cudaAddonPath} not built — npm install builds it where nvcc exists]`;
const gpuSkip = gpu ? '' : ` [skipped: ${availability.reason}]`;

describe('kvtier_cuda addon', () => {
  it.skipIf(!built || gpu)(`loads without a GPU and reports why CUDA is unusable${builtSkip}`, () => {
    expect(availability.addon).not.toBeNull();
    expect(availability.devices).toBe(0);
    expect(availability.reason).toMatch(/no usable CUDA device: .+/);
    expect(resolveDevice('auto').device).toBe('cpu');
    expect(() => resolveDevice('cuda')).toThrow(/KVTIER_DEVICE=cuda but CUDA is not usable: no usable CUDA device/);
    expect(() => CudaContext.open()).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_NO_CUDA' }));
  });

  it.skipIf(!gpu)(`CudaModel: export → import + suffix prefill equals the full prefill${gpuSkip}`, async () => {
    const ctx = CudaContext.open();
    try {
      const cfg = { nVocab: 64, dModel: 64, nLayer: 2, nHead: 2, nKvHead: 1, headDim: 64, dFfn: 128,
        rmsEps: 1e-5, ropeBase: 10000, ropeMode: RopeMode.NORMAL };
      const pageBytes = ctx.createKvPool({ layers: cfg.nLayer, kvHeads: cfg.nKvHead, headDim: cfg.headDim, pages: 8 });
      expect(pageBytes).toBe(2 * cfg.nLayer * cfg.nKvHead * 64 * cfg.headDim * 2);
      const rand = lcg(12345);
      const model = ctx.createModel(cfg);
      const w = (name: string, rows: number, cols: number, scale: number) =>
        model.bind(name, ctx.uploadWeight(CudaDtype.F32, rows, cols, rand(rows * cols, scale)));
      const ones = (name: string) =>
        model.bind(name, ctx.uploadWeight(CudaDtype.F32, 1, cfg.dModel, new Float32Array(cfg.dModel).fill(1)));
      w('token_embd.weight', cfg.nVocab, cfg.dModel, 1);
      w('output.weight', cfg.nVocab, cfg.dModel, 0.5);
      ones('output_norm.weight');
      for (let l = 0; l < cfg.nLayer; l++) {
        ones(`blk.${l}.attn_norm.weight`);
        ones(`blk.${l}.ffn_norm.weight`);
        w(`blk.${l}.attn_q.weight`, 128, 64, 0.3);
        w(`blk.${l}.attn_k.weight`, 64, 64, 0.3);
        w(`blk.${l}.attn_v.weight`, 64, 64, 0.1);
        w(`blk.${l}.attn_output.weight`, 64, 128, 0.1);
        w(`blk.${l}.ffn_gate.weight`, 128, 64, 0.1);
        w(`blk.${l}.ffn_up.weight`, 128, 64, 0.1);
        w(`blk.${l}.ffn_down.weight`, 64, 128, 0.1);
      }
      const tokens = Int32Array.from({ length: 150 }, (_, i) => (i * 7 + 3) % cfg.nVocab);
      const full = model.forward(tokens, 0, Int32Array.of(0, 1, 2), 'last');
      const staging = ctx.pinned(2 * pageBytes);
      await ctx.exportDone(ctx.exportBlocks(Int32Array.of(0, 1), staging));
      ctx.importBlocks(Int32Array.of(5, 6), staging);
      const suffix = model.forward(tokens.subarray(128), 128, Int32Array.of(5, 6, 7), 'last');
      ctx.awaitImport();
      expect(suffix.greedy[0]).toBe(full.greedy[0]);
      expect(Buffer.from(suffix.logits!.buffer).equals(Buffer.from(full.logits!.buffer))).toBe(true);
    } finally {
      ctx.close();
    }
  }, 120_000);

  it.skipIf(!gpu)(`CudaBackend implements the Backend seam: ops, views, pages, typed shape errors${gpuSkip}`, () => {
    const be = CudaBackend.open();
    try {
      expect(be.info().name).toBe('cuda');
      const rand = lcg(7);
      const x = rand(3 * 64, 1), wm = rand(5 * 64, 1);
      const w = be.uploadWeight('f32', 5, 64, new Uint8Array(wm.buffer));
      const big = be.alloc(3 * 64 + 15 + 8);
      const tx = be.view(big, 0, 3 * 64), ty = be.view(big, 3 * 64 + 8, 15);
      be.write(tx, x);
      be.matmul(ty, tx, w, 3);
      const y = be.read(ty);
      for (let m = 0; m < 3; m++)
        for (let n = 0; n < 5; n++) {
          let s = 0;
          for (let k = 0; k < 64; k++) s += x[m * 64 + k] * wm[n * 64 + k];
          expect(Math.abs(y[m * 5 + n] - s)).toBeLessThan(1e-4);
        }
      expect(() => be.matmul(ty, tx, w, 4)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
      // KV: write 70 tokens, export page 0, import it into page 3, attention over either table is bit-equal.
      const pool = be.createKvPool({ layers: 1, kvHeads: 1, headDim: 64, pages: 4 });
      const kv = be.alloc(70 * 64);
      be.write(kv, rand(70 * 64, 1));
      be.kvWrite(pool, 0, Int32Array.of(0, 1), 0, 70, kv, kv);
      be.copyIntoPage(pool, 3, be.copyFromPage(pool, 0));
      const q = be.alloc(2 * 64);
      be.write(q, rand(2 * 64, 2));
      const out = be.alloc(2 * 64);
      be.attention(out, q, pool, 0, 2, 0.125, [{ blockTable: Int32Array.of(0, 1), pos0: 69, queries: 1 }]);
      const a = be.read(out).slice(0, 128);
      be.attention(out, q, pool, 0, 2, 0.125, [{ blockTable: Int32Array.of(3, 1), pos0: 69, queries: 1 }]);
      expect(Buffer.from(be.read(out).buffer).equals(Buffer.from(a.buffer))).toBe(true);
      expect(() => be.createKvPool({ layers: 1, kvHeads: 1, headDim: 64, pages: 1, dtype: 'f32' })).toThrow(
        expect.objectContaining({ code: 'KVT_ERR_NATIVE_CUDA_UNSUPPORTED' }),
      );
    } finally {
      be.close();
    }
  }, 120_000);
});

describe('native/cuda/register.ts with createBackend (KVTIER_DEVICE)', () => {
  const cpuBuilt = existsSync(new URL('../../native/build/Release/kvtier_native.node', import.meta.url));
  const cpuSkip = cpuBuilt ? '' : ' [skipped: the CPU addon native/build/Release/kvtier_native.node is not built]';

  it.skipIf(!cpuBuilt || gpu)(`cuda without a usable GPU: typed error with the CUDA reason; auto → cpu${cpuSkip}${gpu ? ' [skipped: a GPU is present]' : ''}`, async () => {
    await import('../../native/cuda/register.ts');
    const { createBackend } = await import('../../native/index.ts');
    expect(() => createBackend('cuda')).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_NO_CUDA' }));
    expect(() => createBackend('cuda')).toThrow(availability.reason);
    expect(createBackend('auto').name).toBe('cpu');
  });

  it.skipIf(!cpuBuilt || !gpu)(`auto picks the registered CUDA backend${gpuSkip}`, async () => {
    await import('../../native/cuda/register.ts');
    const { createBackend } = await import('../../native/index.ts');
    const be = createBackend('auto');
    expect(be.name).toBe('cuda');
    (be as CudaBackend).close();
  });
});
