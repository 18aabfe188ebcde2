/**
 * DeepSeek (GGUF `deepseek2`: MLA + MoE) against llama.cpp (node-llama-cpp
 * 3.21.1's CPU build) on the same random-weight synthetic:deepseek-tiny files
 * (inference-core/synthetic/deepseek-synthetic.ts), both shapes:
 *   v3       q LoRA, sigmoid gating + exp_probs_b, 4 groups / 2 used, norm, scale 2.5,
 *            split attn_k_b/attn_v_b, YaRN ×4 past an original context of 256
 *   v2-lite  attn_q, softmax gating, 2 shared experts, no norm, YaRN mscale_all_dim 0.707
 *   v2-lite fused   the same with the legacy attn_kv_b (llama.cpp runs it as MHA)
 * Per file × {f32, f16, q8_0} weights (f16 KV on both sides):
 *   - last-position log-softmax for 1-, 65- and 300-token prompts (300 is past the
 *     original context), max |ours − llama.cpp| / llama.cpp's log-prob spread:
 *     f32 1e-3 (measured ≤ 4.9e-4; with f32 KV on both sides ≤ 1.2e-6, so what is
 *     left is the two sides rounding to f16 KV differently), f16 1.5e-3 (measured
 *     ≤ 8.3e-4), q8_0 2.5e-2 (measured 7e-3..1.4e-2: both sides quantize activations);
 *   - a 32-token greedy continuation equal up to llama.cpp's first near-tie, then
 *     teacher-forced argmax agreement on every step that is not a near-tie;
 *   - cache equivalence over the latent blocks: exported blocks imported into a
 *     fresh sequence + the suffix prefilled == the whole prompt prefilled, bit for bit.
 * K-quants: deepseek-tiny 4× wider (rows of whole 256-value blocks) in f32, quantized by
 * llama.cpp's own llama-quantize (test/helpers/llamacpp-quantize.py) to q4_k_m (Q4_K with
 * Q5_0 fallbacks for the 128-wide attn_k_b / attn_q_b / ffn_down_exps rows, Q6_K head) and
 * q6_k: the 3-D expert and per-head tensors are computed slice by slice. 1-token logits agree
 * to ≤ 2e-6 (weights and Q8_K activations decode identically), longer prompts within 3e-2
 * (measured 1.4e-2..2.3e-2; q8_0 at the same width measures 1.5e-2, f32 5.8e-4: both sides
 * quantize activations, and a routed-expert choice that flips on a near-tie amplifies it).
 * And the check can fail: the same v3 weights without the YaRN keys (plain rope,
 * kq scale 1/√kDim) miss llama.cpp on the scaled file by more than 5× the tolerance.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { ensureDeepseekModel, type DeepseekShape, type DeepseekWeightType } from '../../inference-core/synthetic/deepseek-synthetic.ts';
import type { DeepseekConfig } from '../../inference-core/deepseek-config.ts';
import { llamaBatch, type LlamaBatchRequest } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR, randomTokens } from './engine-fixtures.ts';
import { itKeepsCacheEquivalence } from './cache-equivalence-check.ts';
import { expectGreedyParity, lastLogits, relError, type ParityCase } from './logit-parity.ts';

const DTYPES: Array<{ weightType: DeepseekWeightType; tolerance: number; nearTie: number }> = [
  { weightType: 'f32', tolerance: 1e-3, nearTie: 5e-3 },
  { weightType: 'f16', tolerance: 1.5e-3, nearTie: 5e-3 },
  { weightType: 'q8_0', tolerance: 2.5e-2, nearTie: 5e-2 },
];
const FILES: Array<{ shape: DeepseekShape; kvB: 'split' | 'fused'; dtypes: DeepseekWeightType[] }> = [
  { shape: 'v3', kvB: 'split', dtypes: ['f32', 'f16', 'q8_0'] },
  { shape: 'v2-lite', kvB: 'split', dtypes: ['f32', 'f16', 'q8_0'] },
  { shape: 'v2-lite', kvB: 'fused', dtypes: ['f16'] },
];
/** K-quant files: llama-quantize's ftype of each (llama.h). */
const KQUANTS: Array<{ shape: DeepseekShape; mix: 'q4_k_m' | 'q6_k'; ftype: number }> = [
  { shape: 'v3', mix: 'q4_k_m', ftype: 15 },
  { shape: 'v2-lite', mix: 'q4_k_m', ftype: 15 },
  { shape: 'v3', mix: 'q6_k', ftype: 18 },
];
const KQUANT_TOLERANCE = 3e-2;
const BINS = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64');

/** deepseek-tiny ×4 wide as llama.cpp's llama-quantize writes `mix`. */
function llamaQuantized(shape: DeepseekShape, mix: string, ftype: number): string {
  const f32 = ensureDeepseekModel('deepseek-tiny', { dataDir: TEST_DATA_DIR, shape, weightType: 'f32', widen: 4 });
  const out = path.join(path.dirname(f32), `llama-quantize-${mix}-${path.basename(f32)}`);
  if (!fs.existsSync(out)) {
    const tmp = `${out}.tmp-${process.pid}`;
    const r = spawnSync('python3', [path.resolve('test/helpers/llamacpp-quantize.py'), BINS, f32, tmp, String(ftype)], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`llama-quantize failed: ${r.stderr.slice(-2000)}`);
    fs.renameSync(tmp, out);
  }
  return out;
}

const PROMPT_LENGTHS = [1, 65, 300];
const GREEDY_TEXT = 'The cache keeps every block of the prompt for days, and the next request';

interface Case extends ParityCase {
  name: string;
  tolerance: number;
  nearTie: number;
}

const CASES: Array<{ name: string; tolerance: number; nearTie: number; file: () => string }> = [
  ...FILES.flatMap((f) =>
    DTYPES.filter((d) => f.dtypes.includes(d.weightType)).map((d) => ({
      name: `${f.shape}${f.kvB === 'fused' ? '-fused' : ''}/${d.weightType}`,
      tolerance: d.tolerance,
      nearTie: d.nearTie,
      file: () => ensureDeepseekModel('deepseek-tiny', { dataDir: TEST_DATA_DIR, shape: f.shape, kvB: f.kvB, weightType: d.weightType }),
    })),
  ),
  ...KQUANTS.map((k) => ({ name: `${k.shape}-x4/${k.mix}`, tolerance: KQUANT_TOLERANCE, nearTie: 5e-2, file: () => llamaQuantized(k.shape, k.mix, k.ftype) })),
];
const cases = new Map<string, Case>();
let bare: LoadedEngine;

beforeAll(async () => {
  const requests: LlamaBatchRequest[] = [];
  const pending: Array<Omit<Case, 'ref' | 'refGreedy'>> = [];
  for (const c of CASES) {
    const modelPath = c.file();
    const engine = await loadEngine(modelPath, { kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20 });
    const prompts = PROMPT_LENGTHS.map((n) => randomTokens(n, engine.vocabSize, 100 + n));
    const greedyPrompt = Array.from(engine.tokenizer.encode(GREEDY_TEXT));
    pending.push({ name: c.name, tolerance: c.tolerance, nearTie: c.nearTie, engine, prompts, greedyPrompt });
    requests.push({ op: 'logitsMany', modelPath, prompts, kvType: 'f16', threads: 1 });
    requests.push({ op: 'greedy', modelPath, tokens: greedyPrompt, nPredict: 32, kvType: 'f16', threads: 1 });
  }
  bare = await loadEngine(ensureDeepseekModel('deepseek-tiny', { dataDir: TEST_DATA_DIR, shape: 'v3', weightType: 'f32', withoutRopeScaling: true }), {
    kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20,
  });
  const results = await llamaBatch(requests);
  pending.forEach((p, i) => {
    const g = results[2 * i + 1];
    cases.set(p.name, { ...p, ref: results[2 * i].logprobs!, refGreedy: { tokens: g.tokens!, margins: g.margins! } });
  });
}, 300_000);

afterAll(() => {
  for (const c of cases.values()) c.engine.destroy();
  bare?.destroy();
});

describe('deepseek2 read as llama.cpp reads it', () => {
  const cfg = (name: string) => cases.get(name)!.engine.config as unknown as DeepseekConfig;
  it('v3: q LoRA, sigmoid gating with groups, norm and scale, split k_b/v_b, YaRN with mscale_all_dim 1', () => {
    expect(cfg('v3/f16')).toMatchObject({
      arch: 'deepseek2', qLoraRank: 32, kvLoraRank: 64, qkNopeDim: 32, qkRopeDim: 16, vHeadDim: 32, kvB: 'split',
      leadingDense: 1, expertCount: 16, expertUsed: 4, expertShared: 1, gating: 'sigmoid', expertGroups: 4, expertGroupsUsed: 2,
      expertWeightsNorm: true, expertWeightsScale: 2.5, ropeScaling: { type: 'yarn', factor: 4, originalContext: 256 },
    });
    expect(cfg('v3/f16').yarnLogMul).toBeCloseTo(1, 6);
  });
  it('v2-lite: no q LoRA, softmax gating, no groups, no norm; the fused file reads key/value_length as per-head dims', () => {
    expect(cfg('v2-lite/f16')).toMatchObject({ qLoraRank: 0, gating: 'softmax', expertGroups: 0, expertWeightsNorm: false, expertShared: 2, kvB: 'split' });
    expect(cfg('v2-lite/f16').yarnLogMul).toBeCloseTo(0.707, 5);
    expect(cfg('v2-lite-fused/f16')).toMatchObject({ kvB: 'fused', qkNopeDim: 32, qkRopeDim: 16, vHeadDim: 32 });
  });
  it('the KV layout is the latent one: one [c_kv | k_pe] row per token and layer', () => {
    const e = cases.get('v3/f16')!.engine;
    expect(e.kvLayout).toMatchObject({ kind: 'mla', layers: 3, kvHeads: 1, headDim: 64 + 16, dtype: 'f16' });
    expect(e.kvLayout.blockBytes).toBe(3 * 64 * 80 * 2);
  });
});

describe.each(CASES)('$name weights', ({ name, tolerance }) => {
  const c = () => cases.get(name)!;

  it.each(PROMPT_LENGTHS.map((n, i) => [n, i]))(`last-position logits of a %i-token prompt within ${tolerance} of llama.cpp`, (n, i) => {
    const k = c();
    expect(k.ref[i]).toHaveLength(k.engine.vocabSize);
    const err = relError(lastLogits(k.engine, k.prompts[i]), k.ref[i]);
    console.log(`deepseek parity ${name} n=${n}: relative error ${err.toExponential(2)} (tolerance ${tolerance})`);
    expect(err).toBeLessThan(tolerance);
  });

  it('greedy 32 tokens equal up to llama.cpp’s first near-tie, teacher-forced argmax after', () => {
    const k = c();
    expectGreedyParity(k.engine, k.greedyPrompt, k.refGreedy, k.nearTie, `deepseek greedy ${name}`);
  });

  itKeepsCacheEquivalence(() => c().engine, 'latent blocks');
});

describe('batched decode and mixed steps', () => {
  it('a decode batch (rows grouped by expert across sequences) gives each sequence its own result, bit for bit', () => {
    const { engine } = cases.get('v3/f16')!;
    const prompts = [randomTokens(70, engine.vocabSize, 1), randomTokens(3, engine.vocabSize, 2), randomTokens(130, engine.vocabSize, 3)];
    const alone = prompts.map((p) => {
      const s = engine.createSequence();
      s.prefill(p);
      const l = s.decode(5);
      s.free();
      return l;
    });
    const seqs = prompts.map((p) => {
      const s = engine.createSequence();
      s.prefill(p);
      return s;
    });
    const batched = engine.decodeBatch(seqs, [5, 5, 5]);
    batched.forEach((l, i) => expect(Buffer.from(l.buffer).equals(Buffer.from(alone[i].buffer))).toBe(true));
    for (const s of seqs) s.free();
  });
});

describe('the parity check notices a missing YaRN', () => {
  it('v3 f32 without its rope scaling misses llama.cpp on the scaled file by > 5× the tolerance at 300 tokens', () => {
    const k = cases.get('v3/f32')!;
    const i = PROMPT_LENGTHS.length - 1;
    const err = relError(lastLogits(bare, k.prompts[i]), k.ref[i]);
    console.log(`deepseek parity v3/f32 without YaRN, n=${PROMPT_LENGTHS[i]}: relative error ${err.toExponential(2)}`);
    expect(err).toBeGreaterThan(5 * k.tolerance);
  });
});
