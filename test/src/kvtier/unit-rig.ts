/**
 * A tier over a real fs store, and the unit calls a worker makes, for the
 * prefix-unit suites of each architecture (tier-units.test.ts: lfm2;
 * tier-units-deepseek4.test.ts): write a unit's blocks and tail, find the
 * longest unit of a prompt, load it, import it and check the continuation
 * against one pass.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { exportUnitBlocks, exportUnitTail, importUnit, type LoadedEngine } from '../../../inference-core/engine/index.ts';
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier, ManualClock, type BlockSealer, type KvNamespace, type LoadedUnit } from '../../../src/kvtier/index.ts';
import { ForwardingStore } from '../../helpers/forwarding-store.ts';

/** The real fs store, counting the gets of each key. */
export class CountingGetsStore extends ForwardingStore {
  readonly gets = new Map<string, number>();
  override get(key: string, options?: Parameters<FsBlobStore['get']>[1]) {
    this.gets.set(key, (this.gets.get(key) ?? 0) + 1);
    return this.inner.get(key, options);
  }
}

export const B = 64;
export const scope = { tenant: 'acme', trafficClass: 'chat' };

export interface Rig {
  tier: KvTier;
  store: CountingGetsStore;
  clock: ManualClock;
  ns: KvNamespace;
  /** Closes the tier and opens it again on the same index and storage (a restarted node: nothing in RAM). */
  reopen(): Promise<void>;
  close(): Promise<void>;
}

/** The rig and unit calls over the engine `engineOf()` gives (read at each call: suites load it in beforeAll). */
export function unitRig(engineOf: () => LoadedEngine) {
  async function openRig(options: { seal?: BlockSealer; hotCacheBytes?: number; fingerprint?: string } = {}): Promise<Rig> {
    const dir = mkdtempSync(join(tmpdir(), 'kvtier-units-'));
    const store = new CountingGetsStore(await FsBlobStore.open({ dir: join(dir, 'blocks') }));
    const clock = new ManualClock();
    const open = () => KvTier.open({ dataDir: join(dir, 'index'), store, blockTokens: B, hotCacheBytes: options.hotCacheBytes ?? 0, clock, seal: options.seal, metadataRedisUrl: '' });
    const tier = await open();
    const ns = tier.namespace({ modelFingerprint: options.fingerprint ?? engineOf().fingerprint, tenantSalt: 'aa01' });
    const rig: Rig = {
      tier, store, clock, ns,
      async reopen() {
        await rig.tier.close();
        rig.tier = await open();
      },
      async close() {
        await rig.tier.close();
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
    return rig;
  }

  /** Writes the unit at `p` of `tokens` as a worker does: its full blocks with store(), its tail with storeUnit(). */
  function writeUnit(rig: Rig, tokens: number[], p: number, s = scope): string {
    const engine = engineOf();
    const seq = engine.createSequence();
    seq.prefill(tokens.slice(0, p));
    const ids = Uint32Array.from(tokens.slice(0, p));
    const full = Math.floor(p / B);
    if (full > 0) rig.tier.store({ namespace: rig.ns, tokens: ids, payloads: exportUnitBlocks(engine, seq, 0, full), layout: engine.kvLayout, ...s });
    const tail = exportUnitTail(engine, seq);
    seq.free();
    return rig.tier.storeUnit({ namespace: rig.ns, tokens: ids, dtype: tail.dtype, sections: tail.sections, ...s });
  }

  async function find(rig: Rig, tokens: number[], s = scope) {
    return rig.tier.lookupUnit(rig.ns, Uint32Array.from(tokens), s, tokens.length - 1);
  }

  async function loadOf(rig: Rig, tokens: number[]): Promise<LoadedUnit | null> {
    const hit = await find(rig, tokens);
    return hit === null ? null : rig.tier.loadUnit(hit);
  }

  /** Imports the loaded unit into a fresh sequence (of `into`, default the rig's engine) and prefills the rest: the logits must equal one pass. */
  function continuesExactly(loaded: LoadedUnit, tokens: number[], into: LoadedEngine = engineOf()): boolean {
    const engine = engineOf();
    const hit = into.createSequence();
    importUnit(into, hit, { position: loaded.position, blocks: loaded.blocks.map((b) => b.payload), tail: loaded.tail.sections });
    loaded.release();
    const a = hit.prefill(tokens.slice(loaded.position));
    const whole = engine.createSequence();
    const b = whole.prefill(tokens);
    hit.free();
    whole.free();
    return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  }

  return { openRig, writeUnit, find, loadOf, continuesExactly };
}
