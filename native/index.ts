/**
 * kvtier's compute core. Pick a backend with `await createBackendAsync()`
 * (KVTIER_DEVICE=auto|cpu|cuda; auto = cuda when the CUDA backend is built
 * and sees a GPU, else cpu) — or the sync `createBackend()`, which only knows
 * the backends already registered — then run ops on its handles.
 * See backend.ts for the seam and the KV page layout.
 */
import { existsSync } from 'node:fs';

import type { NativeAddon } from './addon-types.ts';
import { NativeError, type Backend, type BackendInfo } from './backend.ts';
import { CpuBackend } from './cpu-backend.ts';
import { loadAddon, wrapNativeError } from './load-addon.ts';

export * from './backend.ts';
export { CpuBackend } from './cpu-backend.ts';
export { CpuKvPool, CpuTensor, CpuWeight, packSegments } from './cpu-handles.ts';
export type { NativeAddon } from './addon-types.ts';
export { ADDON_PATH, loadAddon } from './load-addon.ts';
export { dsv4HcWeights, dsv4MoeCombine, dsv4RmsNormRows, dsv4SwigluClamp } from './dsv4-rows.ts';

/** A backend another module (native/cuda) makes available; see registerBackend. */
export interface BackendFactory {
  /** null when usable, else why not (no device, not built). */
  unavailableReason(): string | null;
  create(): Backend;
}

const factories = new Map<string, BackendFactory>();

/** Called by a device backend's module on import (e.g. native/cuda registers 'cuda'). */
export function registerBackend(name: 'cuda', factory: BackendFactory): void {
  factories.set(name, factory);
}

export type DeviceChoice = 'auto' | 'cpu' | 'cuda';

let defaultCpu: CpuBackend | null = null;

export function createBackend(device: DeviceChoice = (process.env.KVTIER_DEVICE as DeviceChoice) || 'auto'): Backend {
  if (device !== 'auto' && device !== 'cpu' && device !== 'cuda') {
    throw new NativeError('KVT_ERR_NATIVE_DEVICE', `KVTIER_DEVICE=${device}: use auto, cpu or cuda`);
  }
  if (device === 'cuda' || device === 'auto') {
    const cuda = factories.get('cuda');
    const why = cuda ? cuda.unavailableReason() : 'the CUDA backend is not built into this install';
    if (cuda && why === null) return cuda.create();
    if (device === 'cuda') throw new NativeError('KVT_ERR_NATIVE_NO_CUDA', `KVTIER_DEVICE=cuda but ${why}; use KVTIER_DEVICE=cpu`);
  }
  defaultCpu ??= new CpuBackend();
  return defaultCpu;
}

const cudaRegister = new URL('./cuda/register.ts', import.meta.url);
let deviceBackendsLoaded: Promise<void> | null = null;

/**
 * Imports the device backends that exist in this checkout (native/cuda/register.ts)
 * so that createBackend('auto') can pick them. Loaded lazily because the CUDA
 * module loads its own addon; the CPU-only path never touches it.
 */
export function loadDeviceBackends(): Promise<void> {
  deviceBackendsLoaded ??= existsSync(cudaRegister)
    ? import(cudaRegister.href).then(() => undefined)
    : Promise.resolve();
  return deviceBackendsLoaded;
}

/** createBackend after loadDeviceBackends(): the way to honour KVTIER_DEVICE=auto|cuda. */
export async function createBackendAsync(
  device: DeviceChoice = (process.env.KVTIER_DEVICE as DeviceChoice) || 'auto',
): Promise<Backend> {
  if (device !== 'cpu') await loadDeviceBackends();
  return createBackend(device);
}

/** The raw addon (tests, benchmarks, reference kernels). */
export function nativeAddon(): NativeAddon {
  return loadAddon();
}

/**
 * deepseek4 attention of T tokens over the keys each selects, on the CPU kernels
 * (src/ops/dsv4-sparse-attention.h: shapes and order); `ref` runs the plain
 * one-thread twin (same bits). Throws KVT_ERR_NATIVE_SHAPE on a bad shape or index.
 */
export function dsv4SparseAttention(
  out: Float32Array, q: Float32Array, keys: Float32Array, idx: Int32Array, off: Int32Array, sinks: Float32Array,
  T: number, H: number, D: number, scale: number, ref = false,
): void {
  const a = loadAddon();
  if (typeof a.dsv4SparseAttention !== 'function') {
    throw new NativeError('KVT_ERR_NATIVE_NOT_BUILT', 'the native addon was built before dsv4SparseAttention existed (deepseek4 needs it): run `npm run install`');
  }
  try {
    if (ref) a.dsv4SparseAttentionRef(out, q, keys, idx, off, sinks, T, H, D, scale);
    else a.dsv4SparseAttention(out, q, keys, idx, off, sinks, T, H, D, scale);
  } catch (e) {
    wrapNativeError(e);
  }
}

/**
 * deepseek4's lightning indexer for T tokens on the CPU kernels
 * (src/ops/dsv4-indexer.h: shapes, order and tie-breaking): sel[t][0..min(n[t], k))
 * ← token t's top-k of keys[0..n[t]). `ref` runs the plain one-thread twin (same
 * picks). Throws KVT_ERR_NATIVE_SHAPE on a bad shape or count.
 */
export function dsv4IndexerTopK(
  sel: Int32Array, q: Float32Array, w: Float32Array, keys: Float32Array, n: Int32Array,
  T: number, H: number, D: number, k: number, scale: number, ref = false,
): void {
  const a = loadAddon();
  if (typeof a.dsv4IndexerTopK !== 'function') {
    throw new NativeError('KVT_ERR_NATIVE_NOT_BUILT', 'the native addon was built before dsv4IndexerTopK existed (deepseek4 needs it): run `npm run install`');
  }
  try {
    if (ref) a.dsv4IndexerTopKRef(sel, q, w, keys, n, T, H, D, k, scale);
    else a.dsv4IndexerTopK(sel, q, w, keys, n, T, H, D, k, scale);
  } catch (e) {
    wrapNativeError(e);
  }
}

/**
 * ggml's activation quantization for a quantized weight, back in f32
 * (src/ops/act-roundtrip.h): 'q8_0' per 32, 'q8_K' per 256. Null when the
 * addon predates it (the caller's TypeScript twin computes the same bits).
 */
export function actRoundTrip(kind: 'q8_0' | 'q8_K', x: Float32Array, out: Float32Array = new Float32Array(x.length)): Float32Array | null {
  const a = loadAddon();
  if (typeof a.actRoundTrip !== 'function') return null;
  try {
    a.actRoundTrip(out, x, kind === 'q8_0' ? 0 : 1);
  } catch (e) {
    wrapNativeError(e);
  }
  return out;
}

/**
 * deepseek4 hyper-connections of T rows (src/ops/dsv4-hc.h): collapse the hc
 * streams H into X by `pre`, or expand the block output Y into hc streams by
 * `post` and `comb`. False when the addon predates them (the TypeScript twin runs).
 */
export function dsv4HcCollapse(X: Float32Array, H: Float32Array, pre: Float32Array, T: number, hc: number, d: number): boolean {
  const a = loadAddon();
  if (typeof a.dsv4HcCollapse !== 'function') return false;
  try {
    a.dsv4HcCollapse(X, H, pre, T, hc, d);
  } catch (e) {
    wrapNativeError(e);
  }
  return true;
}

export function dsv4HcExpand(out: Float32Array, Y: Float32Array, H: Float32Array, post: Float32Array, comb: Float32Array, T: number, hc: number, d: number): boolean {
  const a = loadAddon();
  if (typeof a.dsv4HcExpand !== 'function') return false;
  try {
    a.dsv4HcExpand(out, Y, H, post, comb, T, hc, d);
  } catch (e) {
    wrapNativeError(e);
  }
  return true;
}

/** ISA in use, ISAs available and thread count of the CPU kernels. */
export function backendInfo(): BackendInfo {
  return new CpuBackend(loadAddon()).info();
}

/** Switches the CPU kernels' ISA at run time (tests); throws KVT_ERR_NATIVE_ISA when unsupported. */
export function setIsa(isa: 'scalar' | 'avx2' | 'avx512'): void {
  try {
    loadAddon().setIsa(isa);
  } catch (e) {
    wrapNativeError(e);
  }
}

/** Resizes the CPU thread pool (n <= 0: default = KVTIER_NATIVE_THREADS or all cores). Returns the new size. */
export function setThreads(n: number): number {
  return loadAddon().setThreads(n);
}

/**
 * The pool's idle workers sleep now instead of spinning out KVTIER_NATIVE_SPIN_US: called when an
 * engine has no step to run, so the core goes to the work that follows (the reply's path, Redis,
 * another process). The next kernel wakes them with a futex wake. A wake can take up to milliseconds on
 * a busy VM; until a worker is awake, the caller runs the kernels alone (join-while-open), it does not wait.
 */
export function parkThreads(): void {
  loadAddon().parkThreads?.();
}

/**
 * Maps a file read-only without copying it: the ArrayBuffer views the page
 * cache. Unmapped when collected, or now with unmapFile (views then read as
 * detached/empty). Throws KVT_ERR_NATIVE_MMAP with the OS reason.
 */
export function mmapFile(path: string): ArrayBuffer {
  try {
    return loadAddon().mmapFile(path);
  } catch (e) {
    wrapNativeError(e);
  }
}

/** Unmaps a buffer from mmapFile now; false if it was not mapped (or already unmapped). */
export function unmapFile(buffer: ArrayBuffer): boolean {
  return loadAddon().unmapFile(buffer);
}

/** Zero-filled native buffer, 64-byte aligned (page aligned from 1 MiB), freed on GC. */
export function allocAligned(bytes: number): ArrayBuffer {
  try {
    return loadAddon().allocAligned(bytes);
  } catch (e) {
    wrapNativeError(e);
  }
}
