/**
 * Prefix units in the tier (src/kvtier/tier-units.ts) on a real lfm2 engine
 * (attention blocks + convolution state) over a real fs store: DeepSeek's
 * unit rule (the longest unit whose whole prefix matches; a partial match is
 * a miss), a hit continues bit for bit, anything wrong with a unit's blocks
 * or tail is a miss, and tails live as blocks do: their bytes are counted,
 * GC expires them by class, purge removes them, encryption seals them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadEngine, unitShapeOf, type LoadedEngine } from '../../../inference-core/engine/index.ts';
import { ensureLfm2Model } from '../../../inference-core/synthetic/lfm2-synthetic.ts';
import { BlockSealer, DAY_MS, TailCodec, TAIL_MAGIC } from '../../../src/kvtier/index.ts';
import { keyringFromSecret } from '../../../src/kvtier/seal/seal-keyring.ts';
import { TEST_DATA_DIR, randomTokens } from '../../inference-core/engine-fixtures.ts';
import { scope, unitRig } from './unit-rig.ts';

let engine: LoadedEngine;

beforeAll(async () => {
  engine = await loadEngine(ensureLfm2Model({ dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 16 * 2 ** 20 });
}, 120_000);
afterAll(() => engine?.destroy());

const { openRig, writeUnit, find, loadOf, continuesExactly } = unitRig(() => engine);

const A = () => randomTokens(100, engine.vocabSize, 11);
const Bt = () => randomTokens(50, engine.vocabSize, 12, 1);
const C = () => randomTokens(40, engine.vocabSize, 13, 2);

describe('prefix units in the tier (lfm2)', () => {
  it('A+B then A+B+C hits A+B exactly and continues bit for bit; A+C misses until a unit covers a prefix of A, then hits exactly that one', async () => {
    const rig = await openRig();
    try {
      const ab = [...A(), ...Bt()];
      expect(writeUnit(rig, ab, 150)).toBe('queued');
      // readable while its write is in flight, then from storage
      expect((await find(rig, [...ab, ...C()]))?.position).toBe(150);
      await rig.tier.flush();
      const abc = [...ab, ...C()];
      const loaded = await loadOf(rig, abc);
      expect(loaded?.position).toBe(150);
      expect(loaded!.blocks).toHaveLength(2);
      expect(continuesExactly(loaded!, abc)).toBe(true);
      // A+C shares 100 tokens (one full block) with the A+B unit: a partial match is a miss
      const ac = [...A(), ...C()];
      expect(await find(rig, ac)).toBeNull();
      // a unit at 64 (an interval / common-prefix unit) covers a prefix of A: A+C hits exactly it
      expect(writeUnit(rig, ac, 64)).toBe('queued');
      await rig.tier.flush();
      const at64 = await loadOf(rig, ac);
      expect(at64?.position).toBe(64);
      expect(continuesExactly(at64!, ac)).toBe(true);
      // A+B+C still takes its longest unit, 150, not 64
      expect((await find(rig, abc))?.position).toBe(150);
      // the same unit again is a duplicate; the counters saw three units written
      expect(writeUnit(rig, ab, 150)).toBe('duplicate');
      expect(rig.tier.stats().units).toMatchObject({ written: 2, loaded: 2 });
    } finally {
      await rig.close();
    }
  });

  it('a tail at a non-block position is keyed by its chain and remaining tokens: another token after the last full block is another unit', async () => {
    const rig = await openRig();
    try {
      const ab = [...A(), ...Bt()];
      writeUnit(rig, ab, 150);
      await rig.tier.flush();
      const other = ab.slice();
      other[149] = (other[149] + 1) % engine.vocabSize;
      expect(await find(rig, [...other, ...C()])).toBeNull();
      // a unit is found only up to maxPosition: a prompt of exactly the unit's length must compute its last token
      expect(await rig.tier.lookupUnit(rig.ns, Uint32Array.from(ab), scope, ab.length - 1)).toBeNull();
    } finally {
      await rig.close();
    }
  });

  it('a missing or corrupt tail, a missing block, or a tail of another model fingerprint is a miss, never a wrong state', async () => {
    const rig = await openRig();
    try {
      const ab = [...A(), ...Bt()];
      const abc = [...ab, ...C()];
      const unitKey = async () => (await find(rig, abc))!.key;
      writeUnit(rig, ab, 150);
      await rig.tier.flush();
      const key = await unitKey();
      const good = (await rig.store.get(key))!;
      expect(new DataView(good.buffer, good.byteOffset).getUint32(0, true)).toBe(TAIL_MAGIC);
      // corrupt: one flipped byte in the payload → a miss, and the blob is deleted
      const bad = good.slice();
      bad[bad.byteLength - 5] ^= 1;
      await rig.store.put(key, bad);
      expect(await loadOf(rig, abc)).toBeNull();
      await rig.tier.flush();
      expect(await rig.store.has([key])).toEqual([false]);
      // missing: the unit is forgotten
      expect(await find(rig, abc)).toBeNull();
      // another fingerprint: a well-formed tail of another model under this key
      writeUnit(rig, ab, 150);
      await rig.tier.flush();
      const codec = await TailCodec.create();
      const decoded = codec.decode((await rig.store.get(key))!);
      await rig.store.put(key, codec.encode({ ...decoded, key: decoded.keyBytes, blockKey: decoded.blockKeyBytes, modelFingerprint: 'another-model' }));
      expect(await loadOf(rig, abc)).toBeNull();
      // a missing block: the tail is there, its block 1 is not
      await rig.store.put(key, good);
      expect((await loadOf(rig, abc))?.position).toBe(150);
      const blockKeys = (await find(rig, abc))!.blocks.keys;
      await rig.store.delete([blockKeys[1]]);
      expect(await loadOf(rig, abc)).toBeNull();
      expect(rig.tier.stats().units!.loadFailed).toBe(3);
    } finally {
      await rig.close();
    }
  });

  it('tails count in usage with their stored size, GC expires them by class, purge removes them', async () => {
    const rig = await openRig();
    try {
      const chat = [...A(), ...Bt()];
      const agent = randomTokens(150, engine.vocabSize, 99);
      writeUnit(rig, chat, 150, { tenant: 'acme', trafficClass: 'chat' });
      writeUnit(rig, agent, 150, { tenant: 'bolt', trafficClass: 'agent' });
      await rig.tier.flush();
      const chatKey = (await find(rig, [...chat, 1]))!.key;
      const agentKey = (await find(rig, [...agent, 1], { tenant: 'bolt', trafficClass: 'agent' }))!.key;
      // 2 blocks + 1 tail per unit, counted at their stored sizes; the tail: header, 22 tokens, the partial K|V of 22 tokens and the conv state
      const usage = rig.tier.usage();
      expect(usage.blocks['c:chat']).toBe(3);
      const chatHit = (await find(rig, [...chat, 1]))!;
      const sizes = await Promise.all([...chatHit.blocks.keys, chatKey].map(async (k) => (await rig.store.get(k))!.byteLength));
      expect(usage.bytes['c:chat']).toBe(sizes[0] + sizes[1] + sizes[2]);
      const shape = unitShapeOf(engine);
      const state = 22 * engine.kvBytesPerToken + shape.conv!.layers.length * shape.conv!.rows * shape.conv!.width * 4;
      expect(sizes[2]).toBeGreaterThan(state);
      expect(sizes[2]).toBeLessThan(state + 1024);
      console.log(`lfm2 unit at 150: tail ${sizes[2]} B (partial K|V ${22 * engine.kvBytesPerToken} B + conv ${state - 22 * engine.kvBytesPerToken} B); blocks 2 × ${sizes[0]} B; whole K|V at 150: ${150 * engine.kvBytesPerToken} B`);
      // 4 days on: agent (3 d) expired, chat (7 d) kept
      rig.clock.advance(4 * DAY_MS);
      const report = await rig.tier.gc();
      expect(report.byClass.agent?.expired.blocks).toBe(3);
      expect(await rig.store.has([agentKey, chatKey])).toEqual([false, true]);
      expect(await find(rig, [...agent, 1], { tenant: 'bolt', trafficClass: 'agent' })).toBeNull();
      expect((await find(rig, [...chat, 1]))?.position).toBe(150);
      // purge by tenant removes the chat unit's tail with its blocks
      const purged = await rig.tier.purge({ tenant: 'acme' });
      expect(purged.removedBlocks).toBe(3);
      expect(await rig.store.has([chatKey])).toEqual([false]);
      expect(await find(rig, [...chat, 1])).toBeNull();
    } finally {
      await rig.close();
    }
  });

  it('with encryption at rest a tail is sealed on storage and still continues bit for bit', async () => {
    const rig = await openRig({ seal: new BlockSealer(keyringFromSecret('u'.repeat(16) + '0123456789abcdef0123456789abcdef'), { openThreads: 0 }) });
    try {
      const ab = [...A(), ...Bt()];
      const abc = [...ab, ...C()];
      writeUnit(rig, ab, 150);
      await rig.tier.flush();
      const key = (await find(rig, abc))!.key;
      const stored = (await rig.store.get(key))!;
      expect(new DataView(stored.buffer, stored.byteOffset).getUint32(0, true)).not.toBe(TAIL_MAGIC);
      const loaded = await loadOf(rig, abc);
      expect(loaded?.position).toBe(150);
      expect(continuesExactly(loaded!, abc)).toBe(true);
    } finally {
      await rig.close();
    }
  });

  it('single flight: concurrent loads of one unit read its tail from storage once, and each continues bit for bit', async () => {
    const rig = await openRig();
    try {
      // p = 40: no blocks, so both loads reach the tail in the same turn
      const a = A();
      writeUnit(rig, a, 40);
      await rig.tier.flush();
      const hit = (await find(rig, a))!;
      expect(hit.position).toBe(40);
      const [one, two] = await Promise.all([rig.tier.loadUnit(hit), rig.tier.loadUnit(hit)]);
      expect(rig.store.gets.get(hit.key)).toBe(1);
      expect(one?.position).toBe(40);
      expect(two?.position).toBe(40);
      expect(continuesExactly(one!, a)).toBe(true);
      expect(continuesExactly(two!, a)).toBe(true);
      expect(rig.tier.stats().units).toMatchObject({ loaded: 2, tailReads: 1 });
    } finally {
      await rig.close();
    }
  });

  it('the hot RAM tier: a tail just written, or just read, is served without a storage read and counts in the tier\'s one budget', async () => {
    const rig = await openRig({ hotCacheBytes: 64 * 2 ** 20 });
    try {
      const ab = [...A(), ...Bt()];
      const abc = [...ab, ...C()];
      writeUnit(rig, ab, 150);
      await rig.tier.flush();
      const hit = (await find(rig, abc))!;
      const tailBytes = (await rig.store.get(hit.key))!.byteLength;
      rig.store.gets.clear();
      // the 2 blocks and the tail, all from RAM: no storage read at all
      const hot = rig.tier.stats().hotCache;
      expect(hot).toMatchObject({ blocks: 2, tails: 1 });
      const blockBytes = await Promise.all(hit.blocks.keys.map(async (k) => (await rig.store.get(k))!.byteLength));
      expect(hot.bytes).toBe(blockBytes[0] + blockBytes[1] + tailBytes);
      rig.store.gets.clear();
      const loaded = await rig.tier.loadUnit(hit);
      expect(rig.store.gets.size).toBe(0);
      expect(continuesExactly(loaded!, abc)).toBe(true);
      expect(rig.tier.stats().units).toMatchObject({ hotHits: 1, tailReads: 0 });
    } finally {
      await rig.close();
    }
    // a budget that holds the blocks but not the tail as well: the tail is read from storage each time
    const small = await openRig({ hotCacheBytes: 1 });
    try {
      const a = A();
      writeUnit(small, a, 40);
      await small.tier.flush();
      expect(small.tier.stats().hotCache).toMatchObject({ tails: 0, bytes: 0 });
      const hit = (await find(small, a))!;
      await small.tier.loadUnit(hit);
      await small.tier.loadUnit(hit);
      expect(small.store.gets.get(hit.key)).toBe(2);
    } finally {
      await small.close();
    }
  });

  it('a tail read from storage stays in the hot tier; purge drops it from RAM too', async () => {
    const rig = await openRig({ hotCacheBytes: 64 * 2 ** 20 });
    try {
      const a = A();
      writeUnit(rig, a, 40);
      await rig.tier.flush();
      const hit = (await find(rig, a))!;
      // a restarted node: nothing in RAM; the first load reads the tail, the second finds it in RAM
      await rig.reopen();
      rig.store.gets.clear();
      const seen = (await find(rig, a))!;
      expect(await rig.tier.loadUnit(seen)).not.toBeNull();
      expect(await rig.tier.loadUnit(seen)).not.toBeNull();
      expect(rig.store.gets.get(hit.key)).toBe(1);
      expect(rig.tier.stats().units).toMatchObject({ tailReads: 1, hotHits: 1 });
      expect(rig.tier.stats().hotCache.tails).toBe(1);
      await rig.tier.purge({ tenant: 'acme' });
      expect(rig.tier.stats().hotCache).toMatchObject({ tails: 0, bytes: 0 });
      expect(await find(rig, a)).toBeNull();
    } finally {
      await rig.close();
    }
  });
});
