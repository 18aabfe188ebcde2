/**
 * One GC at a time across the cluster (src/cluster: Redis lease), against a
 * real redis-server, and GC processes on a real shared fs store:
 * - the lease: NX, renew, compare-and-delete, loss aborts the holder's signal;
 * - a second GC process started while one runs reports "skipped: held by …";
 * - a GC process SIGKILLed mid-run leaves no blob the index does not know
 *   (storage first, then index), and the next run makes index == storage.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

import { GC_LEADER_KEY, RedisLeaderLock } from '../../../src/cluster/index.ts';
import type { RedisServer } from '../../helpers/redis-server.ts';
import { tempDir } from '../kvtier/fixtures.ts';
import { redisForSuite } from '../../helpers/suite-fixture.ts';
import { childArgs } from '../../helpers/ts-child.ts';

const CHILD = new URL('./gc-child.ts', import.meta.url).pathname;

interface Child {
  process: ChildProcess;
  lines: Record<string, unknown>[];
  /** Resolves with the first line (so far or later) that matches. */
  waitFor(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

function startChild(args: string[]): Child {
  // `node --import tsx`, not the tsx CLI: the CLI runs the script in a child process, and a SIGKILL to it would not reach the GC.
  const child = spawn(process.execPath, [...childArgs(CHILD), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  const waiters: Array<{ match: (line: Record<string, unknown>) => boolean; resolve: (line: Record<string, unknown>) => void }> = [];
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout! }).on('line', (text) => {
    const line = JSON.parse(text) as Record<string, unknown>;
    lines.push(line);
    for (const waiter of [...waiters]) if (waiter.match(line)) waiters.splice(waiters.indexOf(waiter), 1), waiter.resolve(line);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    process: child,
    lines,
    exited,
    waitFor: (match) =>
      new Promise((resolve, reject) => {
        const seen = lines.find(match);
        if (seen) return resolve(seen);
        waiters.push({ match, resolve });
        void exited.then((code) => reject(new Error(`gc-child ${args[0]} exited (${code}) before the awaited line; stderr:\n${stderr}`)));
      }),
  };
}

async function runChild(args: string[]): Promise<Record<string, unknown>[]> {
  const child = startChild(args);
  const code = await child.exited;
  expect(code, `gc-child ${args.join(' ')}`).toBe(0);
  return child.lines;
}

const resultOf = (lines: Record<string, unknown>[]) => lines.find((l) => 'result' in l)!.result as { status: string; reason?: string; heldBy?: { owner: string }; removed?: { expired: { blocks: number } } };
const check = async (store: string, data: string) => (await runChild(['check', store, data]))[0] as { storage: string[]; index: string[]; expiredInIndex: number };

let redis: RedisServer;
let client: Redis;
const cleanups: Array<() => Promise<void>> = [];

redisForSuite((server, c) => {
  redis = server;
  client = c;
});
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
});

async function filledNode(oldPrompts: number, freshPrompts: number): Promise<{ store: string; data: string }> {
  const dir = await tempDir('kvtier-cluster-gc-');
  cleanups.push(dir.remove);
  const store = join(dir.path, 'blocks');
  const data = join(dir.path, 'node');
  const [line] = await runChild(['fill', store, data, String(oldPrompts), String(freshPrompts)]);
  expect(line).toEqual({ written: (oldPrompts + freshPrompts) * 8 });
  return { store, data };
}

describe('RedisLeaderLock', () => {
  it('lets one holder in, names it to the others, and releases only its own lease', async () => {
    const a = new RedisLeaderLock(client, 'test:lock:1', { owner: 'node-a', ttlMs: 600 });
    const b = new RedisLeaderLock(client, 'test:lock:1', { owner: 'node-b', ttlMs: 600 });
    const first = await a.tryAcquire();
    expect(first.acquired).toBe(true);
    const second = await b.tryAcquire();
    expect(second).toMatchObject({ acquired: false, heldBy: { owner: 'node-a' } });
    // Renewal keeps it past several TTLs.
    await sleep(1500);
    expect(await b.holder()).toMatchObject({ owner: 'node-a' });
    if (!first.acquired) return;
    expect(first.lease.signal.aborted).toBe(false);
    expect(await first.lease.release()).toBe(true);
    expect(await a.holder()).toBeNull();
    const third = await b.tryAcquire();
    expect(third.acquired).toBe(true);
    // A stale holder's release must not delete the new holder's lease.
    expect(await first.lease.release()).toBe(false);
    expect(await a.holder()).toMatchObject({ owner: 'node-b' });
    if (third.acquired) await third.lease.release();
  });

  it('aborts the holder signal when the lease is taken from it', async () => {
    const a = new RedisLeaderLock(client, 'test:lock:2', { owner: 'node-a', ttlMs: 600 });
    const got = await a.tryAcquire();
    if (!got.acquired) throw new Error('expected the free lease');
    await client.set('test:lock:2', JSON.stringify({ owner: 'intruder', token: 'x', since: Date.now() }));
    await new Promise<void>((resolve) => got.lease.signal.addEventListener('abort', () => resolve(), { once: true }));
    expect((got.lease.signal.reason as { code: string }).code).toBe('KVT_ERR_CLUSTER_LOCK_LOST');
    expect(await got.lease.release()).toBe(false);
    expect(await a.holder()).toMatchObject({ owner: 'intruder' });
  });

  it('rejects a bad ttl with a typed error', () => {
    expect(() => new RedisLeaderLock(client, 'k', { owner: 'x', ttlMs: 5 })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CLUSTER_BAD_OPTION' }));
  });
});

describe('cluster GC', () => {
  it('a second GC started while one runs reports "skipped: held by" the first', async () => {
    const { store, data } = await filledNode(12, 2);
    // The first run's deletes after its first batch wait for the release below: it is still running when the second starts, however slow the machine.
    const first = startChild(['gc', store, data, redis.url, 'gc-node-a', 'hold:test:gc-release']);
    await first.waitFor((l) => 'progress' in l && (l.progress as { removedBlocks: number }).removedBlocks > 0);
    const second = await runChild(['gc', store, data, redis.url, 'gc-node-b', '0']);
    expect(resultOf(second)).toMatchObject({ status: 'skipped', heldBy: { owner: 'gc-node-a' } });
    expect(resultOf(second).reason).toMatch(/^skipped: held by gc-node-a since /);
    expect(second.some((l) => 'progress' in l && (l.progress as { removedBlocks: number }).removedBlocks > 0)).toBe(false);
    // The first was still running when the second gave up, and finishes alone.
    expect(first.lines.some((l) => 'result' in l)).toBe(false);
    await client.lpush('test:gc-release', '1');
    expect(await first.exited).toBe(0);
    expect(resultOf(first.lines)).toMatchObject({ status: 'ran', owner: 'gc-node-a', removed: { expired: { blocks: 96 } } });
    expect(await client.get(GC_LEADER_KEY)).toBeNull();
    const after = await check(store, data);
    expect(after.index).toEqual(after.storage);
    expect(after.index).toHaveLength(16);
  });

  it('a GC killed mid-run leaves at most its in-flight batches unindexed (their deletes journaled); the next run makes index and storage agree', async () => {
    const { store, data } = await filledNode(12, 2);
    const victim = startChild(['gc', store, data, redis.url, 'gc-doomed', '150']);
    await victim.waitFor((l) => 'progress' in l && (l.progress as { removedBlocks: number }).removedBlocks >= 8);
    victim.process.kill('SIGKILL');
    await victim.exited;

    const torn = await check(store, data);
    // Plane (and index) first, then storage: only the batches in flight can be stored but unindexed — the one whose
    // blob delete ran and the two the plane had taken meanwhile (3 × batchSize 4); the plane's pending-delete journal
    // holds them for the next run.
    expect(torn.storage.filter((key) => !torn.index.includes(key)).length).toBeLessThanOrEqual(12);
    expect(torn.expiredInIndex, 'the kill landed mid-run').toBeGreaterThan(0);
    expect(torn.storage.length).toBeGreaterThan(16);

    // The dead holder's lease blocks others until its TTL runs out — then the next GC takes over.
    const blocked = await runChild(['gc', store, data, redis.url, 'gc-next', '0']);
    const blockedResult = resultOf(blocked);
    if (blockedResult.status === 'skipped') expect(blockedResult.heldBy?.owner).toBe('gc-doomed');
    while ((await client.get(GC_LEADER_KEY)) !== null) await sleep(100);
    const next = await runChild(['gc', store, data, redis.url, 'gc-next', '0']);
    expect(resultOf(next).status).toBe('ran');

    const healed = await check(store, data);
    expect(healed.index).toEqual(healed.storage);
    expect(healed.expiredInIndex).toBe(0);
    expect(healed.index).toHaveLength(16);
  });
});
