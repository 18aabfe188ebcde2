/**
 * Speculative decoding benchmark (`npm run bench -- speculative`): tokens per
 * second of the decode phase, plain vs speculative with a fixed draft of 5 vs
 * the adaptive draft length, same model and same run, on three workloads:
 *
 *   draft    target synthetic:small f16, draft its q4_0 copy (same vocab), greedy
 *   copy     n-gram drafts, synthetic:small q8_0, greedy, an agent-like prompt that
 *            repeats tool output (spans recur, so suffix matches are frequent)
 *   useless  n-gram drafts, same model, sampling (temperature 1.5, top-k 8) on a
 *            repetitive prompt: lookups match, drafts are mostly rejected
 *
 *   spec_<w>_tps_off | _fixed5 | _adaptive     decode tok/s (sum over prompts and rounds)
 *   spec_<w>_adaptive_over_fixed5, spec_<w>_adaptive_over_off
 *   spec_<w>_accept_fixed5 | _adaptive         accepted / proposed drafts
 *   spec_useless_tps_nodraft                    the speculative loop with drafting off: its target law
 *                                               picks top-k by selection where Sampler sorts the whole
 *                                               vocabulary, so off is slower for reasons other than drafts;
 *                                               adaptive_over_nodraft is the cost of the useless drafts
 *   spec_json_tps_off | _fixed5 | _adaptive     a JSON-schema (constrained) reply, n-gram drafts, greedy:
 *                                               decode tok/s with the grammar's masks on every row
 *   spec_json_identical                          constrained speculative replies == plain constrained, token for token
 *   spec_batch_tps_per_seq | _batched           4 concurrent sequences with the draft model (adaptive), verified
 *                                               in one target step each round; drafting per sequence (one draft
 *                                               forward per sequence and position) vs batched (one per position)
 *   spec_batch_draft_forwards_per_seq | _batched  draft-engine forwards per emitted token
 *   spec_greedy_identical                       greedy outputs of all speculative runs == plain
 *
 * Configurations are interleaved round by round (off, fixed5, adaptive, …) so
 * a noisy shared machine slows them alike. KVTIER_DATA_DIR: where synthetic
 * models are generated (default data/); KVTIER_BENCH_SPEC_ROUNDS (default 2),
 * KVTIER_BENCH_SPEC_THREADS (default min(2, cores)).
 */
import * as os from 'node:os';
import { loadEngine, type LoadedEngine } from '../inference-core/index.ts';
import { Sampler, type SamplingOptions } from '../inference-core/sampling/sampler.ts';
import { SpeculativeSession, type DraftLengthMode, type SpeculativeMode } from '../inference-core/speculative/index.ts';
import { BATCH_SEQS, batchWorkload } from './speculative-batch.ts';
import { jsonWorkload } from './speculative-constrained.ts';
import { randomTokens } from '../test/inference-core/engine-fixtures.ts';

const GEN = 64;
const PROMPTS = 2;
const ROUNDS = Number(process.env.KVTIER_BENCH_SPEC_ROUNDS ?? 2);
/** The added workloads (json, batch) can be left out: KVTIER_BENCH_SPEC_EXTRA=none (default both). */
const WORKLOADS = new Set((process.env.KVTIER_BENCH_SPEC_EXTRA ?? 'json,batch').split(','));

/** nodraft: the speculative loop with drafts disabled (its sampling code, no drafts): what useless drafts are compared to besides off. */
type Config = 'off' | 'fixed5' | 'adaptive' | 'nodraft';

interface Run {
  tokens: number[];
  ms: number;
  proposed: number;
  accepted: number;
}

function generate(target: LoadedEngine, prompt: number[], sampling: SamplingOptions, config: Config, mode: SpeculativeMode, draft?: LoadedEngine): Run {
  const seq = target.createSequence();
  try {
    const sampler = new Sampler(sampling);
    const first = sampler.sample(seq.prefill(prompt));
    const out = [first];
    const t0 = performance.now();
    if (config === 'off') {
      while (out.length < GEN) out.push(sampler.sample(seq.decode(out[out.length - 1])));
      return { tokens: out, ms: performance.now() - t0, proposed: 0, accepted: 0 };
    }
    const length: DraftLengthMode = config === 'adaptive' ? 'adaptive' : 'fixed';
    const session = new SpeculativeSession({ target: seq, context: [...prompt, first], sampling, mode, length: { mode: length, fixed: config === 'nodraft' ? 0 : 5 }, ...(draft ? { draftEngine: draft } : {}) });
    while (out.length < GEN) out.push(...session.next(GEN - out.length));
    const ms = performance.now() - t0;
    session.free();
    return { tokens: out, ms, proposed: session.stats.proposed, accepted: session.stats.accepted };
  } finally {
    seq.free();
  }
}

function agentPrompt(vocab: number, seed: number): number[] {
  // system + tool output, then the assistant quoting names/code from it: spans recur.
  const tool = randomTokens(48, vocab, seed, 16);
  const names = randomTokens(8, vocab, seed + 1, 16);
  return [...randomTokens(32, vocab, seed + 2, 16), ...tool, ...names, ...tool.slice(8, 40), ...names, ...tool.slice(0, 24), ...names.slice(0, 4)];
}

function repetitivePrompt(vocab: number, seed: number): number[] {
  const span = randomTokens(16, vocab, seed, 16);
  return [...span, ...span, ...span, ...span, ...span.slice(0, 8)];
}

async function workload(
  name: string,
  target: LoadedEngine,
  prompts: number[][],
  sampling: SamplingOptions,
  mode: SpeculativeMode,
  draft?: LoadedEngine,
  configs: Config[] = ['off', 'fixed5', 'adaptive'],
): Promise<{ fields: Record<string, number>; identical: boolean }> {
  const zero = (): Record<Config, number> => ({ off: 0, fixed5: 0, adaptive: 0, nodraft: 0 });
  const ms = zero();
  const tokens = zero();
  const prop = zero();
  const acc = zero();
  let identical = true;
  // Warm-up (page faults, thread pool, draft engine).
  generate(target, prompts[0], sampling, 'adaptive', mode, draft);
  for (let r = 0; r < ROUNDS; r++) {
    for (const prompt of prompts) {
      const outs: Partial<Record<Config, number[]>> = {};
      for (const c of configs) {
        const run = generate(target, prompt, sampling, c, mode, draft);
        ms[c] += run.ms;
        tokens[c] += run.tokens.length - 1;
        prop[c] += run.proposed;
        acc[c] += run.accepted;
        outs[c] = run.tokens;
      }
      if ((sampling.temperature ?? 0) === 0) identical &&= JSON.stringify(outs.fixed5) === JSON.stringify(outs.off) && JSON.stringify(outs.adaptive) === JSON.stringify(outs.off);
    }
    console.error(`[bench] speculative ${name}: round ${r + 1}/${ROUNDS}`);
  }
  const tps = (c: Config) => (tokens[c] * 1000) / ms[c];
  const round = (x: number, d = 2) => Number(x.toFixed(d));
  return {
    identical,
    fields: {
      [`spec_${name}_tps_off`]: round(tps('off')),
      [`spec_${name}_tps_fixed5`]: round(tps('fixed5')),
      [`spec_${name}_tps_adaptive`]: round(tps('adaptive')),
      [`spec_${name}_adaptive_over_fixed5`]: round(tps('adaptive') / tps('fixed5'), 3),
      [`spec_${name}_adaptive_over_off`]: round(tps('adaptive') / tps('off'), 3),
      [`spec_${name}_accept_fixed5`]: round(acc.fixed5 / Math.max(1, prop.fixed5), 3),
      [`spec_${name}_accept_adaptive`]: round(acc.adaptive / Math.max(1, prop.adaptive), 3),
      [`spec_${name}_drafts_per_token_fixed5`]: round(prop.fixed5 / Math.max(1, tokens.fixed5), 3),
      [`spec_${name}_drafts_per_token_adaptive`]: round(prop.adaptive / Math.max(1, tokens.adaptive), 3),
      ...(configs.includes('nodraft') ? { [`spec_${name}_tps_nodraft`]: round(tps('nodraft')), [`spec_${name}_adaptive_over_nodraft`]: round(tps('adaptive') / tps('nodraft'), 3) } : {}),
    },
  };
}


export async function run(): Promise<Record<string, number | string | boolean>> {
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  const threads = Number(process.env.KVTIER_BENCH_SPEC_THREADS ?? Math.min(2, Math.max(1, os.availableParallelism())));
  const opts = { dataDir, threads, kvDtype: 'f16' as const, poolBytes: 64 * 2 ** 20 };
  const out: Record<string, number | string | boolean> = { spec_threads: threads, spec_gen_tokens: GEN, spec_prompts: PROMPTS, spec_rounds: ROUNDS };
  let identical = true;

  const f16 = await loadEngine('synthetic:small:f16', opts);
  const q4 = await loadEngine('synthetic:small:q4_0', opts);
  try {
    const prompts = Array.from({ length: PROMPTS }, (_, i) => randomTokens(64, f16.vocabSize, 500 + i, 16));
    const w = await workload('draft', f16, prompts, { temperature: 0 }, 'draft', q4);
    Object.assign(out, w.fields);
    identical &&= w.identical;
    if (WORKLOADS.has('batch')) {
      const b = batchWorkload(f16, q4, ROUNDS, Array.from({ length: BATCH_SEQS }, (_, i) => randomTokens(64, f16.vocabSize, 600 + i, 16)));
      Object.assign(out, b.fields);
      identical &&= b.identical;
    }
  } finally {
    q4.destroy();
    f16.destroy();
  }

  const q8 = await loadEngine('synthetic:small:q8_0', opts);
  try {
    const copy = await workload('copy', q8, Array.from({ length: PROMPTS }, (_, i) => agentPrompt(q8.vocabSize, 700 + i)), { temperature: 0 }, 'ngram');
    Object.assign(out, copy.fields);
    identical &&= copy.identical;
    // Top-k 8: the reply reuses few tokens, so suffixes match often, but a matched continuation is rarely the draw.
    const useless = await workload('useless', q8, Array.from({ length: PROMPTS }, (_, i) => repetitivePrompt(q8.vocabSize, 900 + i)), { temperature: 1.5, topK: 8, seed: 3 }, 'ngram', undefined, ['off', 'fixed5', 'adaptive', 'nodraft']);
    Object.assign(out, useless.fields);
    if (WORKLOADS.has('json')) {
      const json = jsonWorkload(q8, ROUNDS, Array.from({ length: PROMPTS }, (_, i) => agentPrompt(q8.vocabSize, 800 + i)));
      Object.assign(out, json.fields);
      out.spec_json_identical = json.identical;
      identical &&= json.identical;
    }
  } finally {
    q8.destroy();
  }
  out.spec_greedy_identical = identical;
  return out;
}
