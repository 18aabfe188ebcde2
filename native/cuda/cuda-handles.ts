/**
 * The CUDA backend's handles: a tensor is a view [buffer, offset, length] of
 * a device buffer, a weight an id in the device arena, the pool the one KV
 * page pool of the context. Shapes are checked here before anything is enqueued.
 */
import { type KvDType, type KvPoolHandle, NativeError, PAGE_TOKENS, type TensorHandle, type WeightDType, type WeightHandle } from '../backend.ts';
import type { CudaView } from './cuda-addon.ts';

export class CudaTensor implements TensorHandle {
  readonly kind = 'tensor' as const;
  constructor(
    readonly length: number,
    readonly buffer: number,
    readonly offset: number,
    /** The allocation itself (free() releases it) rather than a view. */
    readonly owner: boolean,
  ) {}
  get view(): CudaView {
    return [this.buffer, this.offset, this.length];
  }
}

export class CudaWeight implements WeightHandle {
  readonly kind = 'weight' as const;
  constructor(
    readonly dtype: WeightDType,
    readonly rows: number,
    readonly cols: number,
    readonly id: number,
  ) {}
}

export class CudaKvPool implements KvPoolHandle {
  readonly kind = 'kvpool' as const;
  readonly dtype: KvDType = 'f16';
  constructor(
    readonly layers: number,
    readonly kvHeads: number,
    readonly headDim: number,
    readonly pages: number,
    readonly pageBytes: number,
  ) {}
  /** A page index inside this pool. */
  checkPage(page: number): void {
    if (!Number.isInteger(page) || page < 0 || page >= this.pages) throw shape(`page ${page} outside the pool of ${this.pages}`);
  }
  checkLayer(layer: number): void {
    if (!Number.isInteger(layer) || layer < 0 || layer >= this.layers) throw shape(`layer ${layer} outside the pool's ${this.layers}`);
  }
  /** A block table that can hold `positions` tokens, every page inside this pool. */
  checkTable(table: Int32Array, positions: number): void {
    if (table.length * PAGE_TOKENS < positions) {
      throw shape(`block table of ${table.length} pages cannot hold ${positions} positions`);
    }
    for (const page of table) this.checkPage(page);
  }
}

export function shape(message: string): NativeError {
  return new NativeError('KVT_ERR_NATIVE_SHAPE', message);
}

export function needInt(name: string, v: number, min = 1): void {
  if (!Number.isInteger(v) || v < min) throw shape(`${name} must be an integer ≥ ${min}, got ${v}`);
}
