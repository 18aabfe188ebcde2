import { describe, expect, it } from 'vitest';
import { PageAllocator, kvLayoutOf } from '../../inference-core/kv/index.ts';
import { codeOf } from './engine-error-code.ts';

describe('PageAllocator', () => {
  it('hands out distinct pages until exhausted, then a typed error with nothing taken', () => {
    const a = new PageAllocator(5);
    const first = a.alloc(3);
    expect(new Set(first).size).toBe(3);
    expect(a.freePages).toBe(2);
    expect(codeOf(() => a.alloc(3))).toBe('KVT_ERR_ENGINE_POOL_EXHAUSTED');
    expect(a.freePages).toBe(2); // all-or-nothing
    const rest = a.alloc(2);
    expect(new Set([...first, ...rest]).size).toBe(5);
    expect(codeOf(() => a.alloc(1))).toBe('KVT_ERR_ENGINE_POOL_EXHAUSTED');
  });

  it('freeing returns pages; refcounts keep shared pages alive', () => {
    const a = new PageAllocator(2);
    const [p, q] = a.alloc(2);
    a.retain(p);
    a.release(p);
    expect(a.freePages).toBe(0);
    a.release(p);
    expect(a.freePages).toBe(1);
    expect(a.alloc(1)[0]).toBe(p);
    a.release(q);
    expect(codeOf(() => a.release(q))).toBe('KVT_ERR_ENGINE_BAD_ARGUMENT'); // double free
  });

  it('alloc and free are O(1) each over many cycles', () => {
    const a = new PageAllocator(1000);
    for (let round = 0; round < 200; round++) {
      const pages = a.alloc(1000);
      for (const p of pages) a.release(p);
    }
    expect(a.freePages).toBe(1000);
  });
});

describe('kvLayoutOf', () => {
  it('computes the block payload size', () => {
    expect(kvLayoutOf(2, 4, 32, 'f16').blockBytes).toBe(2 * 2 * 4 * 64 * 32 * 2);
    expect(kvLayoutOf(2, 4, 32, 'f32').blockBytes).toBe(2 * 2 * 4 * 64 * 32 * 4);
  });
});
