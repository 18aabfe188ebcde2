/**
 * Encryption at rest (src/kvtier/seal): AES-256-GCM seal/open throughput on
 * encoded blocks, and what it costs a load — the same prompt loaded from a
 * sealed and a plaintext fs store, pair by pair in the same run.
 *
 *   npx tsx bench/storage-seal.ts
 *   npm run bench -- storage          (merged with the other storage fields)
 *
 * encrypt_gbps / decrypt_gbps: plaintext bytes per second through
 * BlockSealer.seal / openInPlace (what the load path runs; `decrypt_fresh_*`:
 * `open`, into a new buffer) on 768 KiB encoded blocks (one 64-token block of
 * the demo model synthetic:small: 12 layers × 4 kv heads × 64 dims, f16),
 * one core, median of rounds. `_16k` fields: the same on 16 KiB blocks (per
 * block costs dominate there). `*_cpu_gbps`: the same bytes per CPU-second
 * of the process (user + system) instead of per wall second — on a shared,
 * oversubscribed machine the wall figures measure the CPU share we got.
 *
 * seal_load_payload_gbps vs plain_load_payload_gbps: KvTier.load of a
 * 64-block prompt (48 MiB of payload) from fs (page cache warm, hot cache
 * off, 8 reads in flight), sealed tier and plaintext tier taking turns;
 * `seal_load_vs_plain` is the median of the per-round ratios. The sealed tier
 * runs the default (`seal_open_path`: `native` = one native call in place on
 * libuv's pool when the addon is built; `seal_native_cipher`: `vaes-avx512`,
 * the addon's 512-bit AES-GCM, or `openssl`, node's EVP — KVTIER_NATIVE_ISA=avx2
 * forces the latter), and skips the payload XXH64 once the tag verified
 * (block-codec.ts's checksum rule); on the fs store a block under the current
 * key id is decrypted as it is read (`seal_read_path`: `read-open`, native
 * aesGcmReadOpen, one pass on libuv's pool); `seal_two_pass_*` is a fourth tier
 * in the same rounds that reads, then opens on the pool (`readOpen: false`, the
 * default before); `seal_inline_*` is a third tier in
 * the same rounds that decrypts with node:crypto on the loading thread (the
 * default before the native open; `nativeOpen: false`, no open threads).
 * Every load is released after it is counted, as the engine does after
 * importBlocks (KVTIER_BENCH_LOAD_RELEASE=0: never).
 * `seal_load_cpu_vs_plain`: CPU-seconds of a plain load / of a sealed one
 * (all threads), the throughput ratio when loads are CPU-bound.
 * `decrypt_native_gbps`: BlockSealer.openAsync on the same 768 KiB blocks with
 * the native open (4 in flight, in place), per wall / per CPU-second.
 * GB/s = 1e9 B/s.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { FsBlobStore } from '../storage-adapters/index.ts';
import { BlockCodec, KvTier, payloadBytesFor, type KvLayout, type KvTierLogger } from '../src/kvtier/index.ts';
import { loadAddon } from '../native/load-addon.ts';
import { BlockSealer, keyringFromSecret } from '../src/kvtier/seal/index.ts';
import { middleSample } from './sample-stats.ts';

const DEMO_LAYOUT: KvLayout = { layers: 12, kvHeads: 4, headDim: 64, dtype: 'f16', tokensPerBlock: 64 };
const SMALL_LAYOUT: KvLayout = { layers: 2, kvHeads: 1, headDim: 32, dtype: 'f16', tokensPerBlock: 64 };
const CRYPTO_ROUNDS = Number(process.env.KVTIER_BENCH_SEAL_ROUNDS ?? 9);
const CRYPTO_BYTES_PER_ROUND = 96 * 1024 * 1024;
const LOAD_BLOCKS = Number(process.env.KVTIER_BENCH_SEAL_LOAD_BLOCKS ?? 64);
const LOAD_PAIRS = Number(process.env.KVTIER_BENCH_SEAL_LOAD_PAIRS ?? 9);
const SALT = 'bench-tenant-salt-0123456789abcdef';

const progress = (line: string) => process.stderr.write(`[bench storage-seal] ${line}\n`);

export async function run(): Promise<Record<string, number | string>> {
  const sealer = new BlockSealer(keyringFromSecret(randomBytes(32).toString('hex')));
  const codec = await BlockCodec.create();
  const big = cryptoRates(sealer, codec, DEMO_LAYOUT);
  const native = await nativeOpenRates(sealer, codec, DEMO_LAYOUT);
  const small = cryptoRates(sealer, codec, SMALL_LAYOUT);
  progress(`native open ${native.wall.toFixed(2)} GB/s (${nativeCipher()}; ${native.cpu.toFixed(2)} per CPU-second)`);
  progress(`seal ${big.encrypt.toFixed(2)} GB/s, open ${big.decrypt.toFixed(2)} GB/s on ${(big.blockBytes / 1024).toFixed(0)} KiB blocks; 16 KiB: ${small.encrypt.toFixed(2)} / ${small.decrypt.toFixed(2)}`);
  const inline = new BlockSealer(sealer.keyring, { openThreads: 0, nativeOpen: false });
  const twoPass = new BlockSealer(sealer.keyring, { readOpen: false });
  const load = await loadRates(sealer, inline, twoPass);
  progress(`load sealed ${load.sealed.toFixed(3)} GB/s (${sealer.openPath}; inline node:crypto ${load.threads.toFixed(3)}), plain ${load.plain.toFixed(3)} GB/s, ratio ${load.ratio.toFixed(3)} (${load.threadsRatio.toFixed(3)}; read then open ${load.callerRatio.toFixed(3)})`);
  await sealer.close();
  await inline.close();
  await twoPass.close();
  return {
    encrypt_gbps: round(big.encrypt, 3),
    decrypt_gbps: round(big.decrypt, 3),
    encrypt_cpu_gbps: round(big.encryptCpu, 3),
    decrypt_cpu_gbps: round(big.decryptCpu, 3),
    decrypt_fresh_gbps: round(big.decryptFresh, 3),
    decrypt_native_gbps: round(native.wall, 3),
    decrypt_native_cpu_gbps: round(native.cpu, 3),
    decrypt_fresh_cpu_gbps: round(big.decryptFreshCpu, 3),
    encrypt_16k_gbps: round(small.encrypt, 3),
    decrypt_16k_gbps: round(small.decrypt, 3),
    seal_block_bytes: big.blockBytes,
    seal_load_payload_gbps: round(load.sealed, 3),
    plain_load_payload_gbps: round(load.plain, 3),
    seal_load_vs_plain: round(load.ratio, 3),
    seal_load_cpu_vs_plain: round(load.cpuRatio, 3),
    seal_inline_load_payload_gbps: round(load.threads, 3),
    seal_inline_load_vs_plain: round(load.threadsRatio, 3),
    seal_two_pass_load_payload_gbps: round(load.caller, 3),
    seal_two_pass_load_vs_plain: round(load.callerRatio, 3),
    seal_read_path: sealer.readsWhileOpening ? 'read-open' : 'read-then-open',
    seal_open_path: sealer.openPath,
    seal_native_cipher: nativeCipher(),
    seal_open_threads: sealer.openThreads,
    seal_load_blocks: LOAD_BLOCKS,
    seal_statistic: `median of ${CRYPTO_ROUNDS} rounds (crypto), of ${LOAD_PAIRS} sealed/plain pairs (load)`,
  };
}

/** Seal then open the same encoded blocks, round after round; plaintext bytes per second. */
function cryptoRates(sealer: BlockSealer, codec: BlockCodec, layout: KvLayout): { encrypt: number; decrypt: number; encryptCpu: number; decryptCpu: number; decryptFresh: number; decryptFreshCpu: number; blockBytes: number } {
  const payload = Uint8Array.from(randomBytes(payloadBytesFor(layout, 64)));
  const key = Uint8Array.from(randomBytes(16));
  const tokens = new Uint32Array(64).map((_, i) => i * 7);
  const encoded = codec.encode({ key, parentKey: new Uint8Array(16), modelFingerprint: 'bench-seal', tokens, layout, payload });
  const blocks = Math.max(8, Math.round(CRYPTO_BYTES_PER_ROUND / encoded.byteLength));
  const sealed: Uint8Array[] = new Array(blocks);
  const encrypt: number[] = [];
  const decrypt: number[] = [];
  const encryptCpu: number[] = [];
  const decryptCpu: number[] = [];
  const decryptFresh: number[] = [];
  const decryptFreshCpu: number[] = [];
  const bytes = blocks * encoded.byteLength;
  for (let round = 0; round < CRYPTO_ROUNDS + 1; round++) {
    let t0 = performance.now();
    let c0 = process.cpuUsage();
    for (let i = 0; i < blocks; i++) sealed[i] = sealer.seal(encoded, key, SALT);
    const sealMs = performance.now() - t0;
    const sealCpuMs = cpuMs(process.cpuUsage(c0));
    t0 = performance.now();
    c0 = process.cpuUsage();
    for (let i = 0; i < blocks; i++) if (sealer.open(sealed[i], key, SALT).byteLength !== encoded.byteLength) throw new Error('open returned another length');
    const freshMs = performance.now() - t0;
    const freshCpuMs = cpuMs(process.cpuUsage(c0));
    const consumed = sealed.map((blob) => blob.slice()); // openInPlace consumes its input; copies made untimed
    t0 = performance.now();
    c0 = process.cpuUsage();
    for (let i = 0; i < blocks; i++) if (sealer.openInPlace(consumed[i], key, SALT).byteLength !== encoded.byteLength) throw new Error('openInPlace returned another length');
    const openMs = performance.now() - t0;
    const openCpuMs = cpuMs(process.cpuUsage(c0));
    if (round === 0) continue; // warm-up
    decryptFresh.push(bytes / (freshMs / 1000) / 1e9);
    decryptFreshCpu.push(bytes / (freshCpuMs / 1000) / 1e9);
    encrypt.push(bytes / (sealMs / 1000) / 1e9);
    decrypt.push(bytes / (openMs / 1000) / 1e9);
    encryptCpu.push(bytes / (sealCpuMs / 1000) / 1e9);
    decryptCpu.push(bytes / (openCpuMs / 1000) / 1e9);
  }
  return { encrypt: middleSample(encrypt), decrypt: middleSample(decrypt), encryptCpu: middleSample(encryptCpu), decryptCpu: middleSample(decryptCpu), decryptFresh: middleSample(decryptFresh), decryptFreshCpu: middleSample(decryptFreshCpu), blockBytes: encoded.byteLength };
}

/** The native cipher `openAsync` runs on large blocks now, or none (node:crypto). */
function nativeCipher(): string {
  try {
    return loadAddon().aesGcmOpenPath();
  } catch {
    return 'none';
  }
}

/** BlockSealer.openAsync (the load path's open) on 768 KiB blocks, 4 in flight, in place; plaintext bytes per second. */
async function nativeOpenRates(sealer: BlockSealer, codec: BlockCodec, layout: KvLayout): Promise<{ wall: number; cpu: number }> {
  const payload = Uint8Array.from(randomBytes(payloadBytesFor(layout, 64)));
  const key = Uint8Array.from(randomBytes(16));
  const encoded = codec.encode({ key, parentKey: new Uint8Array(16), modelFingerprint: 'bench-seal', tokens: new Uint32Array(64).map((_, i) => i * 7), layout, payload });
  const sealed = sealer.seal(encoded, key, SALT);
  const blocks = Math.max(8, Math.round(CRYPTO_BYTES_PER_ROUND / encoded.byteLength));
  const work = Array.from({ length: blocks }, () => new Uint8Array(sealed.byteLength));
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let round = 0; round < CRYPTO_ROUNDS + 1; round++) {
    for (const blob of work) blob.set(sealed); // openAsync consumes its input; refilled untimed
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    let next = 0;
    const opener = async () => {
      while (next < blocks) if ((await sealer.openAsync(work[next++], key, SALT)).byteLength !== encoded.byteLength) throw new Error('openAsync returned another length');
    };
    await Promise.all([opener(), opener(), opener(), opener()]);
    const ms = performance.now() - t0;
    const cpuMsTaken = cpuMs(process.cpuUsage(c0));
    if (round === 0) continue; // warm-up
    wall.push((blocks * encoded.byteLength) / (ms / 1000) / 1e9);
    cpu.push((blocks * encoded.byteLength) / (cpuMsTaken / 1000) / 1e9);
  }
  return { wall: middleSample(wall), cpu: middleSample(cpu) };
}

async function loadRates(sealer: BlockSealer, threadSealer: BlockSealer, callerSealer: BlockSealer): Promise<{ sealed: number; plain: number; ratio: number; threads: number; threadsRatio: number; cpuRatio: number; caller: number; callerRatio: number }> {
  const root = await mkdtemp(join(process.env.KVTIER_BENCH_DIR ?? tmpdir(), 'kvtier-bench-seal-'));
  const logger: KvTierLogger = { warn: (fields, message) => progress(`warn ${message} ${JSON.stringify(fields)}`), info: () => {} };
  const tokens = new Uint32Array(LOAD_BLOCKS * 64).map((_, i) => (i * 2654435761) % 151_936);
  const payloadBytes = payloadBytesFor(DEMO_LAYOUT, 64);
  const sides: { tier: KvTier; store: FsBlobStore }[] = [];
  try {
    for (const name of ['plain', 'sealed', 'threads', 'caller'] as const) {
      const store = await FsBlobStore.open({ dir: join(root, name, 'blocks') });
      const seal = name === 'sealed' ? sealer : name === 'threads' ? threadSealer : name === 'caller' ? callerSealer : undefined;
      const tier = await KvTier.open({ dataDir: join(root, name, 'node'), store, hotCacheBytes: 0, writeBehindMaxBytes: 1 << 30, logger, ...(seal ? { seal } : {}) });
      sides.push({ tier, store });
      const namespace = tier.namespace({ modelFingerprint: 'bench-seal', tenantSalt: SALT });
      const payloads = Array.from({ length: LOAD_BLOCKS }, (_, b) => Uint8Array.from(randomBytes(payloadBytes)).fill(b & 0xff, 0, 64));
      tier.store({ namespace, tokens, layout: DEMO_LAYOUT, tenant: 'bench', trafficClass: 'chat', payloads });
      await tier.flush();
      if (tier.stats().blocksWritten !== LOAD_BLOCKS) throw new Error(`${name}: stored ${tier.stats().blocksWritten} of ${LOAD_BLOCKS} blocks`);
    }
    progress(`load: ${LOAD_BLOCKS} blocks × ${(payloadBytes / 1024).toFixed(0)} KiB, ${LOAD_PAIRS} pairs + 1 warm-up, under ${root}`);
    const hits = await Promise.all(sides.map(({ tier }) => tier.lookup(tier.namespace({ modelFingerprint: 'bench-seal', tenantSalt: SALT }), tokens, { tenant: 'bench', trafficClass: 'chat' })));
    const rates = { plain: [] as number[], sealed: [] as number[], ratio: [] as number[], threads: [] as number[], threadsRatio: [] as number[], cpuRatio: [] as number[], caller: [] as number[], callerRatio: [] as number[] };
    for (let pair = 0; pair < LOAD_PAIRS + 1; pair++) {
      const pairRates: number[] = [0, 0, 0, 0];
      const pairCpu: number[] = [0, 0, 0, 0];
      // Who goes first rotates, so a burst of background load lands on every side alike.
      const order = [0, 1, 2, 3].map((k) => (pair + k) % 4);
      for (const side of order) {
        const t0 = performance.now();
        const c0 = process.cpuUsage();
        const loaded = await sides[side].tier.load(hits[side]);
        const ms = performance.now() - t0;
        pairCpu[side] = cpuMs(process.cpuUsage(c0));
        if (loaded.blocks.length !== LOAD_BLOCKS) throw new Error(`load returned ${loaded.blocks.length} of ${LOAD_BLOCKS} blocks (${loaded.stoppedAt?.code})`);
        // As the engine does after importBlocks: the buffers are recycled for the next load.
        if (process.env.KVTIER_BENCH_LOAD_RELEASE !== '0') loaded.release();
        pairRates[side] = (LOAD_BLOCKS * payloadBytes) / (ms / 1000) / 1e9;
      }
      if (pair === 0) continue;
      rates.plain.push(pairRates[0]);
      rates.sealed.push(pairRates[1]);
      rates.ratio.push(pairRates[1] / pairRates[0]);
      rates.threads.push(pairRates[2]);
      rates.threadsRatio.push(pairRates[2] / pairRates[0]);
      rates.cpuRatio.push(pairCpu[0] / pairCpu[1]);
      rates.caller.push(pairRates[3]);
      rates.callerRatio.push(pairRates[3] / pairRates[0]);
    }
    return { plain: middleSample(rates.plain), sealed: middleSample(rates.sealed), ratio: middleSample(rates.ratio), threads: middleSample(rates.threads), threadsRatio: middleSample(rates.threadsRatio), cpuRatio: middleSample(rates.cpuRatio), caller: middleSample(rates.caller), callerRatio: middleSample(rates.callerRatio) };
  } finally {
    for (const { tier, store } of sides) {
      await tier.close();
      await store.close();
    }
    await rm(root, { recursive: true, force: true });
  }
}

function cpuMs(usage: NodeJS.CpuUsage): number {
  return (usage.user + usage.system) / 1000;
}

function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await run()));
}
