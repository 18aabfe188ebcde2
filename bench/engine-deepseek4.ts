/**
 * DeepSeek V4 (deepseek4) on synthetic deepseek4-small (d 512, 8 trunk layers,
 * ratios 0/0/4/128/4/128/4/128, SWA 128, indexer top-64, 32 experts top-4 + 1
 * shared; inference-core/synthetic/deepseek4-specs.ts), Q8_0 weights: the
 * served engine path (loadEngine → Deepseek4Graph, mat-vecs on the native CPU
 * kernels, state in pool pages) vs llama.cpp (node-llama-cpp's CPU build, f16
 * KV), same file, same prompt, each side at its best of 1 and 2 threads.
 *
 *   deepseek4_prefill_tps / deepseek4_llamacpp_prefill_tps   a PREFILL_TOKENS prompt (4× the SWA window); best of
 *                                                            KVTIER_BENCH_DEEPSEEK4_PREFILL_ROUNDS (1) prefills per
 *                                                            side, the sides alternating round by round
 *   deepseek4_prefill_cpu_s / _llamacpp_                     CPU seconds of that prefill (process.cpuUsage, all
 *                                                            threads; the least over the rounds)
 *   deepseek4_decode_tps  / deepseek4_llamacpp_decode_tps    DECODE_TOKENS greedy steps after a
 *                                                            LONG_TOKENS (4k) prompt
 *   deepseek4_long_prefill_tps / _llamacpp_                  the 4k prompt's prefill (both sides)
 *   deepseek4_prefill_ratio, deepseek4_decode_ratio           ours / llama.cpp (target ≥ 1.0)
 *   deepseek4_state_bytes_4k / _32k                           f32 state of one sequence (deepseek4StateBytes;
 *                                                            at 4k also read off the served sequence)
 *   deepseek4_state_bytes_per_token_4k / _32k                 the same per context token
 *   mtp_*                                                     MTP drafting vs plain decode after a
 *                                                            PREFILL_TOKENS prompt, paired and interleaved
 *                                                            (bench/deepseek4-mtp.ts; figures in mtpFigures)
 */
import * as os from 'node:os';
import { argmax, loadEngine } from '../inference-core/index.ts';
import type { Deepseek4Graph } from '../inference-core/engine/deepseek4-graph.ts';
import type { Deepseek4Config } from '../inference-core/engine/deepseek4-config.ts';
import { deepseek4StateBytes } from '../inference-core/engine/deepseek4-state.ts';
import { ensureDeepseek4Model } from '../inference-core/synthetic/index.ts';
import { randomTokens } from '../test/inference-core/engine-fixtures.ts';
import { llamaBench } from '../test/helpers/llamacpp.ts';
import { measureMtp, type MtpFigures, type Paired } from './deepseek4-mtp.ts';

const PREFILL_TOKENS = 512;
const LONG_TOKENS = 4096;
const DECODE_TOKENS = 16;
/** Greedy tokens per MTP round (KVTIER_BENCH_DEEPSEEK4_MTP_TOKENS); 512 did not steady the figure here (RESULTS). */
const MTP_DECODE_TOKENS = Number(process.env.KVTIER_BENCH_DEEPSEEK4_MTP_TOKENS ?? 128);
const THREAD_CHOICES = [1, 2].filter((t) => t <= Math.max(1, os.availableParallelism()));
/** KVTIER_BENCH_DEEPSEEK4_PARTS=mtp: only the MTP part (llama.cpp's 4k prefills take minutes), at KVTIER_BENCH_DEEPSEEK4_MTP_THREADS (1). */
const PARTS = new Set((process.env.KVTIER_BENCH_DEEPSEEK4_PARTS ?? 'engine,mtp').split(',').map((p) => p.trim()));
const MTP_THREADS = Number(process.env.KVTIER_BENCH_DEEPSEEK4_MTP_THREADS ?? 1);
/** Paired rounds of the MTP part per load of its engines (KVTIER_BENCH_DEEPSEEK4_MTP_ROUNDS). */
const MTP_ROUNDS = Number(process.env.KVTIER_BENCH_DEEPSEEK4_MTP_ROUNDS ?? 8);
/** Fresh loads of the MTP part's engines, load order rotated (KVTIER_BENCH_DEEPSEEK4_MTP_LOADS): placement averaged out. */
const MTP_LOADS = Number(process.env.KVTIER_BENCH_DEEPSEEK4_MTP_LOADS ?? 3);
/** Tokens per interleaved slice of an MTP round (KVTIER_BENCH_DEEPSEEK4_MTP_SLICE). */
const MTP_SLICE = Number(process.env.KVTIER_BENCH_DEEPSEEK4_MTP_SLICE ?? 16);
const mtpOptions = (threads: number) => ({ threads, decodeTokens: MTP_DECODE_TOKENS, rounds: MTP_ROUNDS, loads: MTP_LOADS, slice: MTP_SLICE });
/** Prefills of the PREFILL_TOKENS prompt per side and thread count (best of them): one ~5 s figure swings 2× with the load. */
const PREFILL_ROUNDS = Math.max(1, Number(process.env.KVTIER_BENCH_DEEPSEEK4_PREFILL_ROUNDS ?? 1));

function say(line: string): void {
  process.stderr.write(`bench engine-deepseek4: ${line}\n`);
}

const round = (x: number, digits = 2) => Number(x.toFixed(digits));

interface Rates {
  prefill: number;
  /** CPU seconds of the best-CPU prefill (not a rate: read, never ranked by best()). */
  prefillCpu: number;
  longPrefill: number;
  decode: number;
}

function best(all: Map<number, Rates>, key: 'prefill' | 'longPrefill' | 'decode'): { tps: number; threads: number } {
  let out = { tps: 0, threads: 0 };
  for (const [threads, r] of all) if (r[key] > out.tps) out = { tps: r[key], threads };
  return out;
}

const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;

/**
 * Both sides at one thread count. Ours through the engine as it serves (a fresh
 * sequence per prompt); llama.cpp through node-llama-cpp (a process per prompt).
 * The short prefill runs PREFILL_ROUNDS times per side, ours and llama.cpp in turn.
 */
async function measurePair(modelPath: string, threads: number, promptFor: (vocab: number) => number[]): Promise<{ ours: Rates; ref: Rates; stateBytes4k: number; cfg: Deepseek4Config }> {
  const engine = await loadEngine(modelPath, { threads, poolBytes: 256 * 2 ** 20 });
  try {
    const prompt = promptFor(engine.vocabSize);
    const warm = engine.createSequence();
    warm.prefill(prompt.slice(0, 64)); // uploads the weights the first rows touch
    warm.free();
    await llamaBench({ modelPath, tokens: prompt.slice(0, 64), nPredict: 4, threads, kvType: 'f16' }); // warm-up
    const ours = { prefill: 0, prefillCpu: Infinity, longPrefill: 0, decode: 0 };
    const ref = { prefill: 0, prefillCpu: Infinity, longPrefill: 0, decode: 0 };
    for (let r = 0; r < PREFILL_ROUNDS; r++) {
      const short = engine.createSequence();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      short.prefill(prompt.slice(0, PREFILL_TOKENS));
      const t1 = performance.now();
      const cpu = cpuSeconds(process.cpuUsage(cpu0));
      short.free();
      ours.prefill = Math.max(ours.prefill, PREFILL_TOKENS / ((t1 - t0) / 1000));
      ours.prefillCpu = Math.min(ours.prefillCpu, cpu);
      const s = await llamaBench({ modelPath, tokens: prompt.slice(0, PREFILL_TOKENS), nPredict: 1, threads, kvType: 'f16' });
      ref.prefill = Math.max(ref.prefill, s.prefillTps);
      ref.prefillCpu = Math.min(ref.prefillCpu, s.prefillCpuMs / 1000);
      say(`round ${r + 1}/${PREFILL_ROUNDS} threads=${threads}: ours ${(PREFILL_TOKENS / ((t1 - t0) / 1000)).toFixed(1)} tok/s (${cpu.toFixed(2)} s CPU), llama.cpp ${s.prefillTps.toFixed(1)} tok/s (${(s.prefillCpuMs / 1000).toFixed(2)} s CPU), load ${os.loadavg()[0]!.toFixed(1)}`);
    }
    const seq = engine.createSequence();
    const t2 = performance.now();
    let logits = seq.prefill(prompt.slice(0, LONG_TOKENS));
    const t3 = performance.now();
    // the served sequence's own state at exactly 4k tokens (graph is the engine's private ForwardGraph)
    const st = (engine as unknown as { graph: Deepseek4Graph }).graph.stateOf(seq.id);
    const stateBytes4k = st ? st.bytes() : Number.NaN;
    const t3b = performance.now();
    for (let i = 0; i < DECODE_TOKENS; i++) logits = seq.decode(argmax(logits));
    const t4 = performance.now();
    seq.free();
    ours.longPrefill = LONG_TOKENS / ((t3 - t2) / 1000);
    ours.decode = DECODE_TOKENS / ((t4 - t3b) / 1000);
    const long = await llamaBench({ modelPath, tokens: prompt.slice(0, LONG_TOKENS), nPredict: DECODE_TOKENS, threads, kvType: 'f16' });
    ref.longPrefill = long.prefillTps;
    ref.decode = long.decodeTps;
    return { ours, ref, stateBytes4k, cfg: engine.config as unknown as Deepseek4Config };
  } finally {
    engine.destroy();
  }
}

export async function run(): Promise<Record<string, number | string>> {
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  const modelPath = ensureDeepseek4Model('deepseek4-small', { dataDir, weightType: 'q8_0' });
  const load0 = os.loadavg()[0]!;
  const ours = new Map<number, Rates>();
  const ref = new Map<number, Rates>();
  let cfg: Deepseek4Config | undefined;
  let measured4k = Number.NaN;
  let prompt: number[] = [];
  if (!PARTS.has('engine')) return await runMtpOnly(modelPath, load0);

  // ours and llama.cpp alternate per thread count, so a load swing on the shared machine hits both sides alike
  for (const threads of THREAD_CHOICES) {
    const m = await measurePair(modelPath, threads, (vocab) => (prompt = randomTokens(LONG_TOKENS, vocab, 7)));
    cfg = m.cfg;
    measured4k = m.stateBytes4k;
    ours.set(threads, m.ours);
    say(`ours threads=${threads}: prefill ${m.ours.prefill.toFixed(1)} tok/s (${PREFILL_TOKENS}), ${m.ours.longPrefill.toFixed(1)} tok/s (${LONG_TOKENS}), decode@4k ${m.ours.decode.toFixed(2)} tok/s`);
    const r = m.ref;
    ref.set(threads, r);
    say(`llama.cpp threads=${threads}: prefill ${r.prefill.toFixed(1)} tok/s (${PREFILL_TOKENS}), ${r.longPrefill.toFixed(1)} tok/s (${LONG_TOKENS}), decode@4k ${r.decode.toFixed(2)} tok/s`);
  }
  const od0 = best(ours, 'decode');
  const mtp = await measureMtp(modelPath, prompt.slice(0, PREFILL_TOKENS), mtpOptions(od0.threads));
  const s4k = deepseek4StateBytes(cfg!, 4096);
  const s32k = deepseek4StateBytes(cfg!, 32768);
  const op = best(ours, 'prefill');
  const ol = best(ours, 'longPrefill');
  const od = best(ours, 'decode');
  const rp = best(ref, 'prefill');
  const rl = best(ref, 'longPrefill');
  const rd = best(ref, 'decode');
  return {
    deepseek4_model: 'synthetic:deepseek4-small:q8_0',
    deepseek4_path: 'engine (Deepseek4Graph, native mat-vecs)',
    deepseek4_prefill_tokens: PREFILL_TOKENS,
    deepseek4_decode_context: LONG_TOKENS,
    deepseek4_prefill_tps: round(op.tps),
    deepseek4_llamacpp_prefill_tps: round(rp.tps),
    deepseek4_prefill_ratio: round(op.tps / rp.tps, 3),
    deepseek4_prefill_rounds: PREFILL_ROUNDS,
    deepseek4_prefill_cpu_s: round(ours.get(op.threads)!.prefillCpu, 3),
    deepseek4_llamacpp_prefill_cpu_s: round(ref.get(rp.threads)!.prefillCpu, 3),
    deepseek4_long_prefill_tps: round(ol.tps),
    deepseek4_llamacpp_long_prefill_tps: round(rl.tps),
    deepseek4_long_prefill_ratio: round(ol.tps / rl.tps, 3),
    deepseek4_decode_tps: round(od.tps),
    deepseek4_llamacpp_decode_tps: round(rd.tps),
    deepseek4_decode_ratio: round(od.tps / rd.tps, 3),
    deepseek4_threads_prefill_long_decode: `${op.threads}/${ol.threads}/${od.threads}`,
    deepseek4_llamacpp_threads_prefill_long_decode: `${rp.threads}/${rl.threads}/${rd.threads}`,
    deepseek4_state_bytes_4k: s4k,
    deepseek4_state_bytes_4k_measured: measured4k,
    deepseek4_state_bytes_32k: s32k,
    deepseek4_state_bytes_per_token_4k: round(s4k / 4096, 1),
    deepseek4_state_bytes_per_token_32k: round(s32k / 32768, 1),
    ...mtpFigures(mtp, od0.threads),
    load_average_start: round(load0),
    load_average_end: round(os.loadavg()[0]!),
  };
}

async function runMtpOnly(modelPath: string, load0: number): Promise<Record<string, number | string>> {
  const mtp = await measureMtp(modelPath, (vocab) => randomTokens(LONG_TOKENS, vocab, 7).slice(0, PREFILL_TOKENS), mtpOptions(MTP_THREADS));
  return { deepseek4_model: 'synthetic:deepseek4-small:q8_0', ...mtpFigures(mtp, MTP_THREADS), load_average_start: round(load0), load_average_end: round(os.loadavg()[0]!) };
}

/**
 * Paired figures (median over the rounds of the per-round ratio; _iqr: its
 * quartiles) are the headline, wall time first (what users feel):
 *   mtp_adaptive_over_off               drafting / plain engine, tok/s (target ≥ 0.97 on random weights)
 *   mtp_adaptive_over_off_cpu           the same from tokens per CPU-second (user + system, all threads)
 *   mtp_aa_over_off(_cpu)               A/A control: a second plain engine / the plain engine (≈ 1.00)
 *   mtp_adaptive_over_plain_same_engine drafting / plain decode on the MTP engine itself
 *   mtp_plain_same_engine_over_off      plain decode on the MTP engine / the plain engine
 *   mtp_prefill_over_off                prefill with the MTP window fed along / without
 * The old estimator (best round of each side), kept for continuity: *_best.
 */
function mtpFigures(mtp: MtpFigures, threads: number): Record<string, number | string> {
  const iqr = (p: Paired) => `${p.q1.toFixed(3)}-${p.q3.toFixed(3)}`;
  const b = mtp.bestTps;
  say(`mtp threads=${threads}: paired on/off ${mtp.wall.on.median.toFixed(3)} (IQR ${iqr(mtp.wall.on)}), A/A ${mtp.wall.off2.median.toFixed(3)} (IQR ${iqr(mtp.wall.off2)}), best-of on/off ${(b.on / b.off).toFixed(3)}, accepted/verification ${mtp.acceptedPerVerification.toFixed(3)}`);
  return {
    mtp_context: PREFILL_TOKENS,
    mtp_decode_tokens: MTP_DECODE_TOKENS,
    mtp_threads: threads,
    mtp_rounds: MTP_ROUNDS,
    mtp_loads: MTP_LOADS,
    mtp_slice_tokens: MTP_SLICE,
    mtp_paired_rounds: mtp.rounds,
    mtp_adaptive_over_off: round(mtp.wall.on.median, 3),
    mtp_adaptive_over_off_iqr: iqr(mtp.wall.on),
    mtp_adaptive_over_off_cpu: round(mtp.cpu.on.median, 3),
    mtp_aa_over_off: round(mtp.wall.off2.median, 3),
    mtp_aa_over_off_iqr: iqr(mtp.wall.off2),
    mtp_aa_over_off_cpu: round(mtp.cpu.off2.median, 3),
    mtp_adaptive_over_plain_same_engine: round(mtp.onOverPlainWall.median, 3),
    mtp_plain_same_engine_over_off: round(mtp.wall.onPlain.median, 3),
    mtp_prefill_over_off: round(mtp.prefillOverOff.median, 3),
    mtp_accepted_per_verification: round(mtp.acceptedPerVerification, 3),
    mtp_tokens_per_step: round(mtp.tokensPerStep, 3),
    mtp_greedy_same: String(mtp.same),
    mtp_off_decode_tps_best: round(b.off),
    mtp_adaptive_decode_tps_best: round(b.on),
    mtp_adaptive_over_off_best: round(b.on / b.off, 3),
    mtp_adaptive_over_off_cpu_best: round(mtp.bestCpuTps.on / mtp.bestCpuTps.off, 3),
    mtp_aa_over_off_best: round(b.off2 / b.off, 3),
    mtp_adaptive_over_plain_same_engine_best: round(b.on / b.onPlain, 3),
  };
}
