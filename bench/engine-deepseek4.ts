/**
 * DeepSeek V4 (deepseek4) on synthetic deepseek4-small (d 512, 8 trunk layers,
 * ratios 0/0/4/128/4/128/4/128, SWA 128, indexer top-64, 32 experts top-4 + 1
 * shared; inference-core/synthetic/deepseek4-specs.ts), Q8_0 weights: kvtier's
 * deepseek4 forward (today the f32 TypeScript reference path, one thread,
 * checked against llama.cpp in test/inference-core/deepseek4-parity.test.ts)
 * vs llama.cpp (node-llama-cpp's CPU build, best of 1 and 2 threads, f16 KV),
 * same file, same prompt.
 *
 *   deepseek4_prefill_tps / deepseek4_llamacpp_prefill_tps   PREFILL_TOKENS (4× the SWA window)
 *   deepseek4_decode_tps  / deepseek4_llamacpp_decode_tps    DECODE_TOKENS greedy steps after them
 *                                                            (after PREFILL_TOKENS, not the 4k context
 *                                                            the issue names: the reference path would
 *                                                            take minutes to prefill 4k)
 *   deepseek4_prefill_ratio, deepseek4_decode_ratio           ours / llama.cpp (target ≥ 1.0)
 *   deepseek4_state_bytes_4k / _32k                           f32 state of one sequence (deepseek4StateBytes)
 *   deepseek4_state_bytes_per_token_4k / _32k                 the same per context token
 *   MTP figures: not measured (no MTP drafting yet)
 */
import * as os from 'node:os';
import { Deepseek4Model } from '../inference-core/engine/deepseek4-forward.ts';
import { deepseek4StateBytes } from '../inference-core/engine/deepseek4-state.ts';
import { ensureDeepseek4Model } from '../inference-core/synthetic/index.ts';
import { randomTokens } from '../test/inference-core/engine-fixtures.ts';
import { bestLlamaCppRates } from './engine-timing.ts';

const PREFILL_TOKENS = 512;
const DECODE_TOKENS = 16;
const THREAD_CHOICES = [1, 2].filter((t) => t <= Math.max(1, os.availableParallelism()));

function say(line: string): void {
  process.stderr.write(`bench engine-deepseek4: ${line}\n`);
}

const round = (x: number, digits = 2) => Number(x.toFixed(digits));

export async function run(): Promise<Record<string, number | string>> {
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  const modelPath = ensureDeepseek4Model('deepseek4-small', { dataDir, weightType: 'q8_0' });
  const model = new Deepseek4Model(modelPath);
  const prompt = randomTokens(PREFILL_TOKENS, model.cfg.nVocab, 7);
  const st = model.newState();
  const t0 = performance.now();
  let logits = model.eval(st, prompt);
  const t1 = performance.now();
  for (let i = 0; i < DECODE_TOKENS; i++) {
    let best = 0;
    for (let j = 1; j < logits.length; j++) if (logits[j]! > logits[best]!) best = j;
    logits = model.step(st, best);
  }
  const t2 = performance.now();
  const prefill = PREFILL_TOKENS / ((t1 - t0) / 1000);
  const decode = DECODE_TOKENS / ((t2 - t1) / 1000);
  say(`ours (reference path, 1 thread): prefill ${prefill.toFixed(1)} tok/s, decode ${decode.toFixed(2)} tok/s`);
  const ref = await bestLlamaCppRates(modelPath, prompt, DECODE_TOKENS, THREAD_CHOICES, 4, (threads, m) =>
    say(`llama.cpp threads=${threads}: prefill ${m.prefillTps.toFixed(1)} tok/s, decode ${m.decodeTps.toFixed(2)} tok/s`),
  );
  const s4k = deepseek4StateBytes(model.cfg, 4096);
  const s32k = deepseek4StateBytes(model.cfg, 32768);
  return {
    deepseek4_model: 'deepseek4-small q8_0',
    deepseek4_prefill_tokens: PREFILL_TOKENS,
    deepseek4_prefill_tps: round(prefill),
    deepseek4_decode_tps: round(decode),
    deepseek4_llamacpp_prefill_tps: round(ref.prefill),
    deepseek4_llamacpp_decode_tps: round(ref.decode),
    deepseek4_llamacpp_threads: `${ref.prefillThreads}/${ref.decodeThreads}`,
    deepseek4_prefill_ratio: round(prefill / ref.prefill, 4),
    deepseek4_decode_ratio: round(decode / ref.decode, 4),
    deepseek4_state_bytes_4k: s4k,
    deepseek4_state_bytes_32k: s32k,
    deepseek4_state_bytes_per_token_4k: round(s4k / 4096, 1),
    deepseek4_state_bytes_per_token_32k: round(s32k / 32768, 1),
  };
}
