/**
 * Loading of the optional `kvtier_cuda` addon and device selection.
 *
 *   KVTIER_DEVICE=auto  (default) cuda when the addon was built with CUDA and a
 *                       device answers, else cpu (with the reason kept)
 *   KVTIER_DEVICE=cpu   never touches CUDA
 *   KVTIER_DEVICE=cuda  cuda or a CudaBackendError saying why not
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { CudaBackendError } from './errors.ts';

/** [bufferId, offset, length] in 4-byte elements. */
export type CudaView = [number, number, number];

/** The raw functions of the addon (see napi/cuda-addon.cc). Handles are opaque. */
export interface CudaAddon {
  abiVersion: number;
  pageTokens: number;
  probe(): { devices: number; reason: string };
  createContext(device: number): unknown;
  destroyContext(ctx: unknown): void;
  deviceInfo(ctx: unknown): { name: string; smCount: number; totalBytes: number; computeCapability: number };
  uploadWeight(ctx: unknown, dtype: number, rows: number, cols: number, data: ArrayBufferView): number;
  weightBytes(ctx: unknown): number;
  kvPoolCreate(ctx: unknown, layers: number, kvHeads: number, headDim: number, pages: number): number;
  allocPinned(ctx: unknown, bytes: number): ArrayBuffer;
  kvImport(ctx: unknown, pageIds: Int32Array, src: ArrayBufferView | ArrayBuffer, stride: number): void;
  kvImportWait(ctx: unknown): void;
  kvExport(ctx: unknown, pageIds: Int32Array, dst: ArrayBufferView | ArrayBuffer, stride: number): number;
  kvExportPoll(ctx: unknown, ticket: number): boolean;
  kvExportWait(ctx: unknown, ticket: number): void;
  modelCreate(ctx: unknown, config: Record<string, number>): unknown;
  modelDestroy(model: unknown): void;
  modelBind(model: unknown, tensorName: string, weightId: number): void;
  forward(
    model: unknown,
    tokens: Int32Array,
    pos0: number,
    blockTable: Int32Array,
    logits: 'none' | 'last' | 'all',
  ): { greedy: Int32Array; logits?: Float32Array };
  bufferAlloc(ctx: unknown, bytes: number): number;
  bufferFree(ctx: unknown, id: number): void;
  bufferWrite(ctx: unknown, id: number, offsetBytes: number, data: ArrayBufferView): void;
  bufferRead(ctx: unknown, id: number, offsetBytes: number, data: ArrayBufferView): void;
  opMatmul(ctx: unknown, y: CudaView, x: CudaView, weight: number, m: number, accumulate: number): void;
  opRmsnorm(ctx: unknown, y: CudaView, x: CudaView, gain: number, rows: number, eps: number): void;
  opRope(
    ctx: unknown, x: CudaView, positions: Int32Array, rows: number, heads: number, headDim: number,
    rot: number, base: number, mode: number,
  ): void;
  opSwiglu(ctx: unknown, out: CudaView, gate: CudaView, up: CudaView, n: number): void;
  opAdd(ctx: unknown, out: CudaView, a: CudaView, b: CudaView, n: number): void;
  opEmbed(ctx: unknown, out: CudaView, tableWeight: number, tokens: Int32Array): void;
  opSoftmax(ctx: unknown, x: CudaView, rows: number, n: number): void;
  opArgmax(ctx: unknown, out: CudaView, x: CudaView, rows: number, n: number): void;
  opKvWrite(
    ctx: unknown, layer: number, blockTable: Int32Array, pos0: number, n: number, k: CudaView, v: CudaView,
  ): void;
  opAttention(
    ctx: unknown, out: CudaView, q: CudaView, layer: number, heads: number, scale: number,
    tables: Int32Array, tableLens: Int32Array, pos0: Int32Array, queries: Int32Array,
  ): void;
  kvPoolFree(ctx: unknown): void;
  synchronize(ctx: unknown): void;
}

export type DeviceKind = 'cpu' | 'cuda';
export type DeviceSetting = 'auto' | DeviceKind;

export interface CudaAvailability {
  /** The addon, when it was built (node-gyp found nvcc) and loads. */
  addon: CudaAddon | null;
  /** Usable CUDA devices (0 when the addon is missing). */
  devices: number;
  /** Why CUDA is not usable; empty when it is. */
  reason: string;
}

const here = path.dirname(fileURLToPath(import.meta.url));
/** Where node-gyp (`npm install`, binding.gyp in native/) puts the addon; KVTIER_CUDA_ADDON overrides. */
export const cudaAddonPath = process.env.KVTIER_CUDA_ADDON || path.resolve(here, '../build/Release/kvtier_cuda.node');

let cached: CudaAvailability | undefined;

/** Loads the addon once and asks the CUDA runtime how many devices it sees. */
export function cudaAvailability(addonPath: string = cudaAddonPath): CudaAvailability {
  if (cached && addonPath === cudaAddonPath) return cached;
  let result: CudaAvailability;
  if (!existsSync(addonPath)) {
    result = {
      addon: null,
      devices: 0,
      reason:
        `the CUDA addon is not built (${addonPath} is missing): it is built by \`npm install\` ` +
        'only where nvcc is found (and KVTIER_CUDA is not 0)',
    };
  } else {
    try {
      const addon = createRequire(import.meta.url)(addonPath) as CudaAddon;
      const probe = addon.probe();
      result = { addon, devices: probe.devices, reason: probe.devices > 0 ? '' : probe.reason };
    } catch (err) {
      result = { addon: null, devices: 0, reason: `the CUDA addon failed to load: ${(err as Error).message}` };
    }
  }
  if (addonPath === cudaAddonPath) cached = result;
  return result;
}

/**
 * Resolves KVTIER_DEVICE (or an explicit setting) to the backend to use.
 * Throws KVT_ERR_NATIVE_DEVICE for an unknown value and
 * KVT_ERR_NATIVE_NO_CUDA when cuda is required but unusable.
 */
export function resolveDevice(
  setting: string | undefined = process.env.KVTIER_DEVICE,
  availability: () => CudaAvailability = cudaAvailability,
): { device: DeviceKind; reason: string } {
  const value = (setting ?? 'auto').trim().toLowerCase() || 'auto';
  if (value !== 'auto' && value !== 'cpu' && value !== 'cuda') {
    throw new CudaBackendError(
      'KVT_ERR_NATIVE_DEVICE',
      `KVTIER_DEVICE=${setting} is not a device: use auto, cpu or cuda`,
    );
  }
  if (value === 'cpu') return { device: 'cpu', reason: 'KVTIER_DEVICE=cpu' };
  const a = availability();
  if (a.addon && a.devices > 0) return { device: 'cuda', reason: '' };
  if (value === 'cuda') {
    throw new CudaBackendError(
      'KVT_ERR_NATIVE_NO_CUDA',
      `KVTIER_DEVICE=cuda but CUDA is not usable: ${a.reason}. Use KVTIER_DEVICE=auto or cpu to run on the CPU.`,
    );
  }
  return { device: 'cpu', reason: a.reason };
}
