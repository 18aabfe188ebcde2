/**
 * Each request's decoder on the engine thread: its sampler, its grammar
 * (structured output) and, from the first sampled token on, its speculative
 * session — all of it held by the request's own RequestSequence, nothing in
 * a table beside it.
 *
 *   constraint?  speculative?   first token                    then
 *   no           no/yes         Sampler                        Sampler | SpeculativeSession
 *   yes          no             Sampler + grammar mask         same decoder
 *   yes          yes            Sampler + GrammarCursor        SpeculativeSession continuing from that cursor
 *
 * A request that shifts logits (bias, penalties) decodes plainly: drafts are
 * verified against the model's own distribution.
 */
import {
  adjustsLogits,
  constrainedDecoder,
  GrammarCursor,
  grammarOf,
  masksOf,
  planSpeculativeBatch,
  Sampler,
  SpeculativeSession,
  vocabOf,
  type LoadedEngine,
  type Sequence,
  type SpeculativeMode,
} from '../../inference-core/index.ts';
import type { RequestSpec } from './job.ts';
import type { DecoderFactory, SequenceDecoder } from './ports.ts';

export interface EngineDecoderOptions {
  speculative: SpeculativeMode | 'off';
  draftEngine: LoadedEngine | null;
  /** Rows one verification feeds at most (the last token + drafts). */
  maxRows: number;
}

export function engineDecoders(engine: LoadedEngine, options: EngineDecoderOptions): DecoderFactory<Sequence, SpeculativeSession> {
  return {
    create: (spec) => createDecoder(engine, spec, options),
    // Draft-model steps of all decoding sequences in one draft-engine step per draft position.
    planBatch: (batch) => planSpeculativeBatch(batch.map(({ decoder, limit }) => ({ session: decoder, limit }))),
  };
}

function createDecoder(engine: LoadedEngine, spec: RequestSpec, options: EngineDecoderOptions): SequenceDecoder<Sequence, SpeculativeSession> {
  const s = spec.sampling;
  const sampler = new Sampler({
    temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed, stopTokens: s.stopTokenIds,
    ...(s.logitBias ? { logitBias: s.logitBias } : {}), presencePenalty: s.presencePenalty ?? 0, frequencyPenalty: s.frequencyPenalty ?? 0,
  });
  const mode = options.speculative === 'off' || adjustsLogits(s) ? null : options.speculative;
  const session = (mode: SpeculativeMode, kv: Sequence, context: ArrayLike<number>, cursor?: GrammarCursor) =>
    new SpeculativeSession({
      target: kv,
      context,
      sampling: { temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed, stopTokens: s.stopTokenIds },
      mode,
      ...(options.draftEngine ? { draftEngine: options.draftEngine } : {}),
      length: { mode: 'adaptive', maxDraft: options.maxRows - 1 },
      ...(cursor ? { constraint: cursor } : {}),
    });
  if (!spec.constraint) {
    return { sample: (logits) => sampler.sample(logits), ...(mode ? { speculate: (kv, context) => session(mode, kv, context) } : {}) };
  }
  if (mode) {
    // Speculative decoding takes over after the first token: that token goes through the grammar cursor the
    // session carries on with (same masks as the decoder below; speculative-constrained.test.ts checks that).
    let cursor: GrammarCursor | null = GrammarCursor.start(masksOf(grammarOf(spec.constraint), vocabOf(engine.tokenizer)), s.maxTokens, s.stopTokenIds);
    return {
      sample: (logits) => {
        const token = sampler.sample(logits, cursor!.mask());
        cursor = cursor!.advance(token);
        return token;
      },
      speculate: (kv, context) => {
        const taken = cursor;
        cursor = null;
        return taken ? session(mode, kv, context, taken) : null;
      },
    };
  }
  // Structured output: the grammar's mask (cached per schema and vocabulary) before every pick.
  const decoder = constrainedDecoder(spec.constraint, engine.tokenizer, s.maxTokens, s.stopTokenIds);
  return {
    sample: (logits) => {
      const token = sampler.sample(logits, decoder.nextMask());
      decoder.accept(token);
      return token;
    },
  };
}
