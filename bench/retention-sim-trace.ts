/**
 * The retention simulator's synthetic trace (bench/retention-sim.ts): deterministic agent + chat
 * sessions of 64 tenants over SIM_DAYS simulated days, in typed arrays so 10^7 blocks fit.
 */
import { createHash } from 'node:crypto';

import { HOUR_MS } from '../src/kvtier/index.ts';
import { seededRandom } from '../test/fuzz/fuzz-runner.ts';

export const T0 = Date.UTC(2026, 0, 1);
export const MINUTE = 60_000;
export const SIM_DAYS = 10;
export const GC_EVERY_MS = 6 * HOUR_MS;
export const TENANTS = 64;
export const BLOCK_BYTES = 64 * 70_272; // a 64-token block of DeepSeek-V3's MLA latent (61 layers × 576 × f16 ≈ 70 KB/token)

/**
 * The trace in typed arrays (10^7 blocks: ~1 M sessions, ~2.7 M turns): per session its class
 * (0 agent, 1 chat), tenant and client hint; per turn one float packing (time since T0, session,
 * turn) so a plain numeric sort gives the replay order (time, then session, then turn).
 */
export interface Trace {
  sessionClass: Uint8Array;
  sessionTenant: Uint8Array;
  /** 1: the session carries the 1 h client hint. */
  sessionHinted: Uint8Array;
  sessions: number;
  turns: Float64Array;
  blocks: number;
}

export const CLASSES = ['agent', 'chat'] as const;
export const TURNS_OF = [3, 2];
export const NEW_PER_TURN_OF = [4, 3];
/** Turn packing: time since T0 (< 2^30 ms over 10 days) × 2^23 + session × 4 + turn stays an exact double below 2^53. */
const SESSION_SLOTS = 2 ** 21;

export function buildTrace(targetBlocks: number): Trace {
  const random = seededRandom(15);
  let capacity = 1024;
  let sessionClass = new Uint8Array(capacity);
  let sessionTenant = new Uint8Array(capacity);
  let sessionHinted = new Uint8Array(capacity);
  let turns = new Float64Array(capacity * 3);
  let sessions = 0;
  let turnCount = 0;
  let blocks = TENANTS * 2 * 2; // shared system prompts
  const span = SIM_DAYS * 24 * HOUR_MS;
  while (blocks < targetBlocks) {
    if (sessions === capacity) {
      capacity *= 2;
      const grow = <A extends Uint8Array | Float64Array>(from: A, size: number): A => {
        const to = new (from.constructor as new (n: number) => A)(size);
        to.set(from);
        return to;
      };
      sessionClass = grow(sessionClass, capacity);
      sessionTenant = grow(sessionTenant, capacity);
      sessionHinted = grow(sessionHinted, capacity);
      turns = grow(turns, capacity * 3);
    }
    if (sessions === SESSION_SLOTS) throw new Error(`retention-sim packs at most ${SESSION_SLOTS} sessions (~2 × 10^7 blocks); lower KVTIER_BENCH_RETENTION_BLOCKS`);
    // The same draws in the same order as before the typed arrays: the trace is unchanged.
    const agent = random() < 0.6;
    const cls = agent ? 0 : 1;
    sessionClass[sessions] = cls;
    sessionTenant[sessions] = Math.floor(random() * TENANTS);
    sessionHinted[sessions] = !agent && random() < 0.05 ? 1 : 0;
    let t = Math.floor(random() * span * 0.8);
    for (let turn = 0; turn < TURNS_OF[cls]; turn++) {
      turns[turnCount++] = t * 2 ** 23 + sessions * 4 + turn;
      t += agent ? Math.floor((0.5 + random() * 4.5) * MINUTE) : Math.floor((1 + random() * 36) * HOUR_MS);
    }
    blocks += TURNS_OF[cls] * NEW_PER_TURN_OF[cls];
    sessions++;
  }
  const sorted = turns.slice(0, turnCount).sort();
  return { sessionClass, sessionTenant, sessionHinted, sessions, turns: sorted, blocks };
}

export function keyOf(kind: string, a: number, b: number): string {
  return createHash('md5').update(`${kind}:${a}:${b}`).digest('hex');
}
