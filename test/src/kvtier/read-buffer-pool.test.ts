/**
 * Recycled read buffers: a buffer comes back to the pool only when its last
 * holder lets go, and coming back detaches it, so a view kept by a holder
 * that released reads as empty — never as the next block's bytes.
 */
import { describe, expect, it } from 'vitest';

import { BufferLease, ReadBufferPool } from '../../../src/kvtier/read-buffer-pool.ts';

describe('ReadBufferPool', () => {
  it('hands a released buffer to the next take of a similar size, and the old views read as empty', () => {
    const pool = new ReadBufferPool(8 << 20);
    const first = pool.take(1_000_000);
    first.fill(0xab);
    const oldView = first.subarray(100, 200);
    pool.give(first.buffer as ArrayBuffer);
    expect(first.byteLength).toBe(0);
    expect(oldView.byteLength).toBe(0);
    const second = pool.take(1_000_100);
    expect(second.byteLength).toBe(1_000_100);
    expect(pool.counts.reused).toBe(1);
    second.fill(0x11);
    // The first holder's views never show the second holder's bytes.
    expect(oldView.byteLength).toBe(0);
    expect(oldView[0]).toBeUndefined();
    expect(() => Array.from(oldView)).toThrow(/detached/);
  });

  it('keeps at most budgetBytes of free buffers and never hands out one far larger than asked', () => {
    const pool = new ReadBufferPool(3 << 20);
    const buffers = [pool.take(1 << 20), pool.take(1 << 20), pool.take(1 << 20), pool.take(1 << 20)];
    for (const b of buffers) pool.give(b.buffer as ArrayBuffer);
    expect(pool.pooledBytes).toBeLessThanOrEqual(3 << 20);
    expect(pool.counts.dropped).toBe(1);
    const small = pool.take(64 * 1024);
    expect(small.buffer.byteLength).toBe(64 * 1024);
    expect(pool.counts.reused).toBe(0);
  });

  it('with a zero budget every take is a fresh buffer of the exact size', () => {
    const pool = new ReadBufferPool(0);
    const a = pool.take(1000);
    pool.give(a.buffer as ArrayBuffer);
    expect(pool.pooledBytes).toBe(0);
    expect(pool.take(1000).buffer.byteLength).toBe(1000);
  });

  it('drops what cannot be detached (already detached) instead of pooling it twice', () => {
    const pool = new ReadBufferPool(8 << 20);
    const a = pool.take(4096);
    const buffer = a.buffer as ArrayBuffer;
    pool.give(buffer);
    pool.give(buffer);
    expect(pool.counts.returned).toBe(1);
    expect(pool.counts.dropped).toBe(1);
  });
});

describe('BufferLease', () => {
  it('returns its buffers only when the last holder lets go; extra unrefs do nothing', () => {
    const pool = new ReadBufferPool(8 << 20);
    const read = pool.take(300_000);
    const decoded = pool.take(700_000);
    const lease = new BufferLease(pool, [read.buffer as ArrayBuffer, decoded.buffer as ArrayBuffer]);
    lease.ref(); // hot cache
    lease.ref(); // a load's result
    lease.unref();
    expect(lease.released).toBe(false);
    expect(decoded.byteLength).toBe(700_000);
    lease.unref();
    expect(lease.released).toBe(true);
    expect(read.byteLength).toBe(0);
    expect(decoded.byteLength).toBe(0);
    expect(pool.counts.returned).toBe(2);
    lease.unref();
    expect(pool.counts.returned).toBe(2);
    expect(() => lease.ref()).toThrow(/released twice/);
  });

  it('discardUnheld gives back a block nobody took, and leaves a held one alone', () => {
    const pool = new ReadBufferPool(8 << 20);
    const held = pool.take(1000);
    const heldLease = new BufferLease(pool, [held.buffer as ArrayBuffer]);
    heldLease.ref();
    heldLease.discardUnheld();
    expect(held.byteLength).toBe(1000);
    const unheld = pool.take(1000);
    new BufferLease(pool, [unheld.buffer as ArrayBuffer]).discardUnheld();
    expect(unheld.byteLength).toBe(0);
  });
});
