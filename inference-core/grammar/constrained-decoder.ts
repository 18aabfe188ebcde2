/**
 * One constrained generation: the matcher state, the remaining token budget,
 * and the mask the sampler applies before each pick.
 *
 *   mask = allowed(state, budget) ∪ (stop tokens, when the state accepts)
 *   budget for token t = remaining − 1 (t itself) − 1 (the stop token after)
 *
 * A token is allowed only if the grammar can still be closed within the
 * budget left after it, counting one token per byte (every byte the closing
 * text needs has a one-byte token in byte-level and byte-fallback
 * vocabularies); so the reply always ends on a stop token in an accepting
 * state, never on max_tokens.
 */
import { GrammarError } from './grammar-errors.ts';
import type { Grammar } from './grammar-nodes.ts';
import { compileConstraint, type ConstraintSpec } from './schema-compiler.ts';
import { deadEnd, GrammarMasks, maskHas, type MatcherState } from './token-mask.ts';
import { vocabIndexOf, type VocabIndex } from './vocab-index.ts';

export interface TokenVocabulary {
  readonly vocabSize: number;
  /** The bytes a token adds to the reply (empty for control tokens). */
  tokenToPiece(id: number): Uint8Array;
}

/** Grammars (and their mask caches, up to MAX_CACHED_MASKS bitsets each) kept, least recently used dropped. */
const MAX_GRAMMARS = 16;
const grammarCache = new Map<string, Grammar>();
const maskCache = new Map<string, GrammarMasks>();

function lruGet<V>(map: Map<string, V>, key: string, make: () => V): V {
  let v = map.get(key);
  if (v !== undefined) {
    map.delete(key);
    map.set(key, v);
    return v;
  }
  v = make();
  map.set(key, v);
  if (map.size > MAX_GRAMMARS) map.delete(map.keys().next().value!);
  return v;
}

/** Compiled grammar of a constraint, cached by its canonical JSON. */
export function grammarOf(spec: ConstraintSpec): Grammar {
  return lruGet(grammarCache, JSON.stringify(spec), () => compileConstraint(spec));
}

export function vocabOf(tokenizer: TokenVocabulary): VocabIndex {
  return vocabIndexOf(tokenizer, tokenizer.vocabSize, (id) => tokenizer.tokenToPiece(id));
}

/** Masks of a grammar over a vocabulary, cached per (grammar, vocabulary fingerprint). */
export function masksOf(grammar: Grammar, vocab: VocabIndex): GrammarMasks {
  return lruGet(maskCache, `${vocab.fingerprint}\u0000${grammar.key}`, () => new GrammarMasks(grammar, vocab));
}

/** Fewest tokens a constrained reply needs (closing bytes + the stop token): max_tokens below it cannot succeed. */
export function minReplyTokens(grammar: Grammar): number {
  return grammar.minLen[grammar.root] + 1;
}

export class ConstrainedDecoder {
  private state: MatcherState;
  private remaining: number;
  private readonly stops: readonly number[];
  private mask: Uint32Array;
  private stopsOnly: Uint32Array | null = null;

  constructor(
    readonly masks: GrammarMasks,
    maxTokens: number,
    stopTokens: readonly number[],
  ) {
    this.state = masks.initial();
    this.remaining = maxTokens;
    this.stops = stopTokens.filter((t) => t >= 0 && t < masks.vocab.size);
    this.mask = new Uint32Array((masks.vocab.size + 31) >>> 5);
    if (masks.cost(this.state) + 1 > maxTokens) {
      throw new GrammarError('KVT_ERR_GRAMMAR_BUDGET', `max_tokens ${maxTokens} is too small: the shortest reply the schema allows takes ${masks.cost(this.state) + 1} tokens`);
    }
  }

  get finished(): boolean {
    return this.state.stacks.length === 0;
  }

  /** The allowed tokens of the next step: a bitset over the vocabulary, shared with the mask cache — read it, never write it. */
  nextMask(): Uint32Array {
    const budget = this.remaining - 2;
    const entry = budget >= 0 ? this.masks.mask(this.state, budget) : null;
    const accepts = entry !== null ? entry.accepts : this.masks.accepts(this.state);
    if (!accepts && (entry === null || entry.maxCost < 0)) throw deadEnd(`no token continues the reply at grammar state ${this.state.key.slice(0, 80)} with ${this.remaining} tokens left`);
    if (entry === null) {
      this.mask = this.stopsOnly ??= (() => {
        const bits = new Uint32Array((this.masks.vocab.size + 31) >>> 5);
        for (const t of this.stops) bits[t >>> 5] |= 1 << (t & 31);
        return bits;
      })();
    } else this.mask = accepts ? this.masks.bitsWithStops(entry, this.stops) : entry.bits;
    return this.mask;
  }

  /** Records the sampled token (it must have been allowed). */
  accept(token: number): void {
    this.remaining--;
    if (this.stops.includes(token)) {
      this.state = { stacks: [], key: '' };
      return;
    }
    if (!maskHas(this.mask, token)) throw deadEnd(`token ${token} was not allowed by the mask`);
    this.state = this.masks.advanceToken(this.state, token);
  }

  /** The state accepts (a stop token may end the reply). */
  get accepting(): boolean {
    return this.masks.accepts(this.state);
  }
}

/** A decoder for `spec` over `tokenizer`'s vocabulary (grammar and masks from the caches). */
export function constrainedDecoder(spec: ConstraintSpec, tokenizer: TokenVocabulary, maxTokens: number, stopTokens: readonly number[]): ConstrainedDecoder {
  return new ConstrainedDecoder(masksOf(grammarOf(spec), vocabOf(tokenizer)), maxTokens, stopTokens);
}
