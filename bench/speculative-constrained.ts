/**
 * `npm run bench -- speculative`, workload json: a JSON-schema (constrained)
 * reply with n-gram drafts, greedy — plain constrained decoding (the worker's
 * ConstrainedDecoder path) vs speculative with a fixed draft of 5 vs the
 * adaptive length (the GrammarCursor path: drafts cut at the first token the
 * grammar rejects, every verified row masked). Same model, same run,
 * configurations interleaved per prompt and round.
 */
import type { LoadedEngine } from '../inference-core/index.ts';
import { constrainedDecoder, grammarOf, masksOf, vocabOf, type ConstraintSpec } from '../inference-core/grammar/index.ts';
import { Sampler } from '../inference-core/sampling/sampler.ts';
import { GrammarCursor, SpeculativeSession, type DraftLengthMode } from '../inference-core/speculative/index.ts';

type Config = 'off' | 'fixed5' | 'adaptive';

interface Run {
  tokens: number[];
  ms: number;
  proposed: number;
  accepted: number;
}

/** A JSON-schema reply long enough to measure: an array of records (keys and enums repeat, strings and numbers do not). */
const JSON_SPEC: ConstraintSpec = {
  kind: 'json_schema',
  schema: {
    type: 'array',
    items: { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, id: { type: 'integer', minimum: 0, maximum: 9999 }, tags: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, maxItems: 3 } }, required: ['name', 'id', 'tags'], additionalProperties: false },
    minItems: 3,
    maxItems: 8,
  },
};
const JSON_MAX_TOKENS = 96;

/** Constrained decoding, plain (the worker's ConstrainedDecoder path) or speculative (its GrammarCursor path). */
function generateJson(target: LoadedEngine, prompt: number[], config: Config): Run {
  const stops = [...target.tokenizer.eogIds];
  const seq = target.createSequence();
  try {
    const sampler = new Sampler({ temperature: 0, stopTokens: stops });
    const logits0 = seq.prefill(prompt);
    const out: number[] = [];
    const ended = () => out.length >= JSON_MAX_TOKENS || stops.includes(out[out.length - 1]);
    const t0 = performance.now();
    if (config === 'off') {
      const dec = constrainedDecoder(JSON_SPEC, target.tokenizer, JSON_MAX_TOKENS, stops);
      let logits = logits0;
      for (;;) {
        const t = sampler.sample(logits, dec.nextMask());
        dec.accept(t);
        out.push(t);
        if (ended()) break;
        logits = seq.decode(t);
      }
      return { tokens: out, ms: performance.now() - t0, proposed: 0, accepted: 0 };
    }
    let cursor = GrammarCursor.start(masksOf(grammarOf(JSON_SPEC), vocabOf(target.tokenizer)), JSON_MAX_TOKENS, stops);
    out.push(sampler.sample(logits0, cursor.mask()));
    cursor = cursor.advance(out[0]);
    const length: DraftLengthMode = config === 'adaptive' ? 'adaptive' : 'fixed';
    const session = new SpeculativeSession({ target: seq, context: [...prompt, out[0]], sampling: { temperature: 0, stopTokens: stops }, mode: 'ngram', length: { mode: length, fixed: 5 }, constraint: cursor });
    while (!ended()) out.push(...session.next(JSON_MAX_TOKENS - out.length));
    const ms = performance.now() - t0;
    session.free();
    return { tokens: out, ms, proposed: session.stats.proposed, accepted: session.stats.accepted };
  } finally {
    seq.free();
  }
}

export function jsonWorkload(target: LoadedEngine, rounds: number, prompts: number[][]): { fields: Record<string, number>; identical: boolean } {
  const configs: Config[] = ['off', 'fixed5', 'adaptive'];
  const ms: Record<string, number> = { off: 0, fixed5: 0, adaptive: 0 };
  const tokens: Record<string, number> = { off: 0, fixed5: 0, adaptive: 0 };
  const prop: Record<string, number> = { off: 0, fixed5: 0, adaptive: 0 };
  const acc: Record<string, number> = { off: 0, fixed5: 0, adaptive: 0 };
  let identical = true;
  generateJson(target, prompts[0], 'adaptive');
  for (let r = 0; r < rounds; r++) {
    for (const prompt of prompts) {
      const outs: Record<string, string> = {};
      for (const c of configs) {
        const run = generateJson(target, prompt, c);
        ms[c] += run.ms;
        tokens[c] += run.tokens.length - 1;
        prop[c] += run.proposed;
        acc[c] += run.accepted;
        outs[c] = JSON.stringify(run.tokens);
      }
      identical &&= outs.fixed5 === outs.off && outs.adaptive === outs.off;
    }
    console.error(`[bench] speculative json: round ${r + 1}/${rounds}`);
  }
  const tps = (c: string) => (tokens[c] * 1000) / ms[c];
  const round = (x: number, d = 2) => Number(x.toFixed(d));
  return {
    identical,
    fields: {
      spec_json_tps_off: round(tps('off')),
      spec_json_tps_fixed5: round(tps('fixed5')),
      spec_json_tps_adaptive: round(tps('adaptive')),
      spec_json_adaptive_over_off: round(tps('adaptive') / tps('off'), 3),
      spec_json_adaptive_over_fixed5: round(tps('adaptive') / tps('fixed5'), 3),
      spec_json_accept_adaptive: round(acc.adaptive / Math.max(1, prop.adaptive), 3),
      spec_json_drafts_per_token_adaptive: round(prop.adaptive / Math.max(1, tokens.adaptive), 3),
      spec_json_reply_tokens: round(tokens.off / (rounds * prompts.length), 1),
    },
  };
}

