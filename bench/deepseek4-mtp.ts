/**
 * MTP drafting on deepseek4 (KVTIER_SPECULATIVE=mtp's path: SpeculativeSession
 * mode 'mtp', adaptive length, at most 7 drafts as served): greedy decode with
 * drafting vs a plain engine loaded without MTP, same file, same prompt, same
 * thread count.
 *
 * The estimator is paired and interleaved, and the same for every side. A
 * round decodes the same prompt on four streams:
 *
 *   off      a plain engine (loadEngine without mtp): what a user with drafting off runs
 *   off2     a second plain engine, loaded the same way: the A/A control
 *   on       the MTP engine, drafting (a new SpeculativeSession, as a served request)
 *   onPlain  the MTP engine, plain decode: drafting's cost without the two instances' difference
 *
 * in slices of SLICE tokens, the four taking turns slice by slice in the
 * orders of a balanced Latin square (each stream runs in each place, and after
 * each other stream, equally often), so a swing of the machine's load lands on
 * all four alike. A round's ratio is one stream's tokens per second over
 * off's, from the sums of its slices; a figure is the median of the rounds'
 * ratios. Engine placement (two identical plain engines differed by up to ~5 %
 * run to run, RESULTS) is averaged by loading the engines afresh `loads` times
 * per run, in a rotated load order. Best-of figures are kept for continuity.
 */
import { argmax, loadEngine, type Engine } from '../inference-core/index.ts';
import type { Sequence } from '../inference-core/engine/sequence.ts';
import { SpeculativeSession } from '../inference-core/speculative/index.ts';
import { percentile } from './sample-stats.ts';

export const STREAMS = ['off', 'off2', 'on', 'onPlain'] as const;
export type StreamName = (typeof STREAMS)[number];

export interface MtpOptions {
  threads: number;
  decodeTokens: number;
  /** Rounds per load of the engines. */
  rounds: number;
  /** Fresh loads of the three engines per run. */
  loads: number;
  /** Tokens per slice of a round. */
  slice: number;
}

export interface Paired {
  median: number;
  q1: number;
  q3: number;
}

export interface MtpFigures {
  /** Paired medians over all rounds, stream over off: wall (tok/s) and CPU (tokens per CPU-second). */
  wall: Record<StreamName, Paired>;
  cpu: Record<StreamName, Paired>;
  /** on over onPlain, paired (drafting's cost on one engine). */
  onOverPlainWall: Paired;
  prefillOverOff: Paired;
  /** Best round of each stream (the old estimator): tok/s wall and per CPU-second. */
  bestTps: Record<StreamName, number>;
  bestCpuTps: Record<StreamName, number>;
  rounds: number;
  acceptedPerVerification: number;
  tokensPerStep: number;
  same: boolean;
}

interface Times {
  wall: number;
  cpu: number;
}

/** Adds `f`'s wall and CPU seconds (process.cpuUsage: every thread) to `acc`. */
function timed(acc: Times, f: () => void): void {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  f();
  const c = process.cpuUsage(c0);
  acc.wall += (performance.now() - t0) / 1000;
  acc.cpu += (c.user + c.system) / 1e6;
}

/** One stream of a round: prefill, then decode forwards up to a count, slice by slice. */
interface Stream {
  readonly decode: Times;
  prefillS: number;
  prefill(): void;
  /** Decodes until `forwards` target forwards' worth of tokens are done. */
  advance(forwards: number): void;
  /** The greedy tokens after the prompt; frees the sequence. */
  finish(decodeTokens: number): number[];
}

/** A stream's timers and its timed prefill (the logits go to `take`). */
function timedPrefill(seq: Sequence, prompt: number[], take: (logits: Float32Array) => void): Pick<Stream, 'decode' | 'prefillS' | 'prefill'> {
  const base = {
    decode: { wall: 0, cpu: 0 },
    prefillS: 0,
    prefill() {
      const t: Times = { wall: 0, cpu: 0 };
      timed(t, () => take(seq.prefill(prompt)));
      base.prefillS = t.wall;
    },
  };
  return base;
}

function plainStream(engine: Engine, prompt: number[]): Stream {
  const seq = engine.createSequence();
  const out: number[] = [];
  let logits: Float32Array = new Float32Array(0);
  const s: Stream = Object.assign(timedPrefill(seq, prompt, (l) => (logits = l)), {
    advance(forwards: number) {
      timed(s.decode, () => {
        while (out.length < forwards) {
          out.push(argmax(logits));
          logits = seq.decode(out[out.length - 1]!);
        }
      });
    },
    finish(n: number) {
      seq.free();
      return out.slice(0, n);
    },
  });
  return s;
}

/** Drafting as served: the first token from the prefill's logits, then a new session (its making is timed). */
function mtpStream(engine: Engine, prompt: number[], stats: Stats): Stream {
  const seq: Sequence = engine.createSequence();
  const got: number[] = [];
  let logits: Float32Array = new Float32Array(0);
  let session: SpeculativeSession | null = null;
  const s: Stream = Object.assign(timedPrefill(seq, prompt, (l) => (logits = l)), {
    advance(forwards: number) {
      // n forwards emit n + 1 tokens (the first came from the prefill), as the plain stream's n decodes
      timed(s.decode, () => {
        if (!session) {
          got.push(argmax(logits));
          session = new SpeculativeSession({ target: seq, context: [...prompt, got[0]!], sampling: { temperature: 0 }, mode: 'mtp', length: { mode: 'adaptive', maxDraft: 7 } });
        }
        while (got.length <= forwards) got.push(...session.next(forwards + 1 - got.length));
      });
    },
    finish(n: number) {
      if (session) for (const k of STAT_KEYS) stats[k] += session.stats[k];
      seq.free();
      return got.slice(0, n);
    },
  });
  return s;
}

const STAT_KEYS = ['verifications', 'accepted', 'checked', 'checkHits', 'emitted', 'steps'] as const;
type Stats = Record<(typeof STAT_KEYS)[number], number>;

/**
 * Balanced Latin square for 4 (Williams): each stream takes each place once and
 * follows each other stream once over the 4 orders.
 */
const ORDERS: readonly (readonly number[])[] = [
  [0, 1, 3, 2],
  [1, 2, 0, 3],
  [2, 3, 1, 0],
  [3, 0, 2, 1],
];

/** Median and quartiles, by sample-stats' percentile (linear between the two nearest rounds). */
function quartiles(xs: number[]): Paired {
  return { median: percentile(xs, 50), q1: percentile(xs, 25), q3: percentile(xs, 75) };
}

/** Loads off, off2 and the MTP engine in the order rotated by `load` (placement must not favour a side). */
async function loadAll(modelPath: string, threads: number, load: number): Promise<{ off: Engine; off2: Engine; on: Engine }> {
  const kinds = ['off', 'off2', 'on'] as const;
  const got: Partial<Record<(typeof kinds)[number], Engine>> = {};
  for (let i = 0; i < kinds.length; i++) {
    const k = kinds[(i + load) % kinds.length]!;
    got[k] = await loadEngine(modelPath, { threads, poolBytes: 64 * 2 ** 20, mtp: k === 'on' });
  }
  return got as { off: Engine; off2: Engine; on: Engine };
}

/**
 * Untimed: first touches of each engine's weights, and the MTP step's code. The drafting session here is the MTP
 * engine's first request, so it probes at its first step and the engine's drafter memory
 * (inference-core/speculative/drafter-memory.ts) knows its drafts from then on: the timed requests run on an
 * engine that has served before, as a deployed one has.
 */
function warmUp(e: { off: Engine; off2: Engine; on: Engine }, prompt: number[]): void {
  const short = prompt.slice(0, 64);
  for (const engine of [e.off, e.off2, e.on]) {
    const st = plainStream(engine, short);
    st.prefill();
    st.advance(8);
    st.finish(0);
  }
  const m = mtpStream(e.on, short, { verifications: 0, accepted: 0, checked: 0, checkHits: 0, emitted: 0, steps: 0 });
  m.prefill();
  m.advance(8);
  m.finish(0);
}

/** `promptOf`: the prompt, or how to make it from the model's vocabulary size. */
export async function measureMtp(modelPath: string, promptOf: number[] | ((vocab: number) => number[]), o: MtpOptions): Promise<MtpFigures> {
  const ratios = { wall: emptyBy<number[]>(() => []), cpu: emptyBy<number[]>(() => []), onOverPlain: [] as number[], prefill: [] as number[] };
  const bestTps = emptyBy(() => 0);
  const bestCpuTps = emptyBy(() => 0);
  const stats: Stats = { verifications: 0, accepted: 0, checked: 0, checkHits: 0, emitted: 0, steps: 0 };
  let same = true;
  const N = o.decodeTokens;
  for (let load = 0; load < o.loads; load++) {
    const e = await loadAll(modelPath, o.threads, load);
    try {
      const prompt = typeof promptOf === 'function' ? promptOf(e.off.vocabSize) : promptOf;
      warmUp(e, prompt);
      for (let r = 0; r < o.rounds; r++) {
        const streams: Record<StreamName, Stream> = { off: plainStream(e.off, prompt), off2: plainStream(e.off2, prompt), on: mtpStream(e.on, prompt, stats), onPlain: plainStream(e.on, prompt) };
        const turn = load * o.rounds + r;
        for (const i of ORDERS[turn % 4]!) streams[STREAMS[i]!].prefill();
        for (let j = 0, upTo = 0; upTo < N; j++) {
          upTo = Math.min(N, upTo + o.slice);
          for (const i of ORDERS[(turn + j) % 4]!) streams[STREAMS[i]!].advance(upTo);
        }
        const tokens = emptyBy((k) => streams[k].finish(N));
        for (const k of STREAMS) same &&= tokens[k].join() === tokens.off.join();
        const off = streams.off.decode;
        for (const k of STREAMS) {
          const d = streams[k].decode;
          ratios.wall[k].push(off.wall / d.wall);
          ratios.cpu[k].push(off.cpu / d.cpu);
          bestTps[k] = Math.max(bestTps[k], N / d.wall);
          bestCpuTps[k] = Math.max(bestCpuTps[k], N / d.cpu);
        }
        ratios.onOverPlain.push(streams.onPlain.decode.wall / streams.on.decode.wall);
        ratios.prefill.push(streams.off.prefillS / streams.on.prefillS);
        process.stderr.write(
          `bench engine-deepseek4: mtp load ${load + 1}/${o.loads} round ${r + 1}/${o.rounds}: on/off ${ratios.wall.on.at(-1)!.toFixed(3)}, off2/off ${ratios.wall.off2.at(-1)!.toFixed(3)}, on/onPlain ${ratios.onOverPlain.at(-1)!.toFixed(3)}, off ${(N / off.wall).toFixed(1)} tok/s\n`,
        );
      }
    } finally {
      e.off.destroy();
      e.off2.destroy();
      e.on.destroy();
    }
  }
  // where drafting's cost goes on random weights: the drafted tokens checked (probes) and verified, per timed request
  const requests = o.loads * o.rounds;
  process.stderr.write(`bench engine-deepseek4: mtp per request: ${(stats.checked / requests).toFixed(2)} probes, ${(stats.verifications / requests).toFixed(2)} verifications\n`);
  return {
    wall: emptyBy((k) => quartiles(ratios.wall[k])),
    cpu: emptyBy((k) => quartiles(ratios.cpu[k])),
    onOverPlainWall: quartiles(ratios.onOverPlain),
    prefillOverOff: quartiles(ratios.prefill),
    bestTps,
    bestCpuTps,
    rounds: o.loads * o.rounds,
    // a probe's token is checked against a plain step's row, not verified: its hit is no accepted length
    acceptedPerVerification: stats.verifications > 0 ? (stats.accepted - stats.checkHits) / stats.verifications : 0,
    tokensPerStep: stats.emitted / Math.max(1, stats.steps),
    same,
  };
}

function emptyBy<T>(f: (k: StreamName) => T): Record<StreamName, T> {
  return { off: f('off'), off2: f('off2'), on: f('on'), onPlain: f('onPlain') };
}
