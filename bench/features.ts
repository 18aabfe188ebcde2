/**
 * `npm run bench -- features`: structured output on the largest real
 * vocabulary here (Llama 3.1, 128,256 tokens; tiny random weights from
 * test/helpers/real-vocab-gguf.ts), the schemas of the structured-output
 * tests, temperature 1 (a random model: only the mask makes replies parse).
 *
 *   schema_valid_fraction   replies that parse and validate (ajv) and end on a stop token
 *   mask_us_p50 / _p95      grammar time per decoded token (next mask + advancing the matcher),
 *                           first pass: every schema seen for the first time (cold mask caches)
 *   mask_us_*_warm          second pass, other seeds (caches filled by the first)
 *   decode_step_us          one decode step of the same model (p50), for the ratio
 *   schema_compile_ms_p50   JSON Schema → grammar, uncached
 *   vocab_index_ms          byte trie + plain-string bitsets, once per vocabulary
 */
import Ajv from 'ajv';
import * as os from 'node:os';

import { compileConstraint, constrainedDecoder, vocabOf } from '../inference-core/grammar/index.ts';
import { argmax, loadEngine, Sampler } from '../inference-core/index.ts';
import { buildRealVocabGguf } from '../test/helpers/real-vocab-gguf.ts';
import { STRUCTURED_SCHEMAS } from '../test/helpers/structured-schemas.ts';
import { responsesHitRatio } from './features-responses.ts';

const MAX_TOKENS = 128;
const DECODE_STEPS = 64;

const say = (s: string): void => void process.stderr.write(`[features] ${s}\n`);
const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const round = (x: number, d: number): number => Number(x.toFixed(d));

export async function run(): Promise<Record<string, number | string | boolean>> {
  const file = buildRealVocabGguf('llama3_1');
  const threads = Math.max(1, Math.min(4, os.cpus().length));
  const engine = await loadEngine(file, { threads, poolBytes: 64 << 20 });
  try {
    const tok = engine.tokenizer;
    const prompt = Array.from(tok.encode('Reply with JSON only.'));
    const stops = [...tok.eogIds];

    // Decode step of this model.
    const seq = engine.createSequence();
    let logits = seq.prefill(prompt);
    const steps: number[] = [];
    for (let i = 0; i < DECODE_STEPS; i++) {
      const t = argmax(logits);
      const t0 = performance.now();
      logits = seq.decode(t);
      steps.push((performance.now() - t0) * 1000);
    }
    seq.free();
    const decodeStepUs = quantile(steps, 0.5);
    say(`vocab ${tok.vocabSize}, decode step p50 ${decodeStepUs.toFixed(0)} µs`);

    const i0 = performance.now();
    vocabOf(tok);
    const vocabIndexMs = performance.now() - i0;
    say(`vocab index ${vocabIndexMs.toFixed(0)} ms`);

    const compileMs: number[] = [];
    for (const { schema } of STRUCTURED_SCHEMAS) {
      const t0 = performance.now();
      compileConstraint({ kind: 'json_schema', schema });
      compileMs.push(performance.now() - t0);
    }

    const ajv = new Ajv({ strict: false });
    const pass = (seedBase: number): { mask: number[]; sample: number[]; valid: number; total: number } => {
      const mask: number[] = [];
      const sample: number[] = [];
      let valid = 0;
      STRUCTURED_SCHEMAS.forEach(({ schema }, i) => {
        const validate = ajv.compile(schema);
        const decoder = constrainedDecoder({ kind: 'json_schema', schema }, tok, MAX_TOKENS, stops);
        const sampler = new Sampler({ temperature: 1, seed: seedBase + i });
        const s = engine.createSequence();
        let l = s.prefill(prompt);
        const ids: number[] = [];
        let stopped = false;
        for (let n = 0; n < MAX_TOKENS; n++) {
          const t0 = performance.now();
          const bits = decoder.nextMask();
          const t1 = performance.now();
          const token = sampler.sample(l, bits);
          const t2 = performance.now();
          decoder.accept(token);
          const t3 = performance.now();
          mask.push((t1 - t0 + (t3 - t2)) * 1000);
          sample.push((t2 - t1) * 1000);
          if (stops.includes(token)) {
            stopped = true;
            break;
          }
          ids.push(token);
          l = s.decode(token);
        }
        s.free();
        try {
          if (stopped && validate(JSON.parse(tok.decode(ids)))) valid++;
        } catch {
          /* counted as invalid */
        }
      });
      return { mask, sample, valid, total: STRUCTURED_SCHEMAS.length };
    };
    const cold = pass(1000);
    say(`cold: ${cold.valid}/${cold.total} valid, mask p50 ${quantile(cold.mask, 0.5).toFixed(1)} µs p95 ${quantile(cold.mask, 0.95).toFixed(0)} µs over ${cold.mask.length} tokens`);
    const warm = pass(2000);
    say(`warm: ${warm.valid}/${warm.total} valid, mask p50 ${quantile(warm.mask, 0.5).toFixed(1)} µs p95 ${quantile(warm.mask, 0.95).toFixed(0)} µs over ${warm.mask.length} tokens`);
    const maskP50 = quantile(cold.mask, 0.5);
    return {
      features_model: 'llama3_1 real vocab (128256), tiny random weights, f16',
      features_schemas: STRUCTURED_SCHEMAS.length * 2,
      schema_valid_fraction: round((cold.valid + warm.valid) / (cold.total + warm.total), 4),
      mask_us_p50: round(maskP50, 1),
      mask_us_p95: round(quantile(cold.mask, 0.95), 1),
      mask_us_p50_warm: round(quantile(warm.mask, 0.5), 1),
      mask_us_p95_warm: round(quantile(warm.mask, 0.95), 1),
      masked_sample_us_p50: round(quantile([...cold.sample, ...warm.sample], 0.5), 1),
      decode_step_us: round(decodeStepUs, 1),
      mask_over_decode_p50: round(maskP50 / decodeStepUs, 4),
      schema_compile_ms_p50: round(quantile(compileMs, 0.5), 3),
      vocab_index_ms: round(vocabIndexMs, 0),
      features_decoded_tokens: cold.mask.length + warm.mask.length,
      ...(await responsesHitRatio()),
    };
  } finally {
    engine.destroy();
  }
}
