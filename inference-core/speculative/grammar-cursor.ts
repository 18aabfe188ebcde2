/**
 * A grammar position as a value: speculative decoding of a constrained reply
 * needs the mask at every drafted position at once (row i of a verification
 * is masked by the state after the accepted tokens and drafts d1..di) and
 * must fall back to the state after the accepted prefix when later drafts
 * are rejected. ConstrainedDecoder only moves forward, so this cursor is
 * immutable: advance() returns a new cursor and leaves this one as it was —
 * a rejected draft is never fed to the state that carries on.
 *
 *   C0 ─d1─▶ C1 ─d2─▶ C2 ─d3─▶ C3          masks of rows 0..3: C0..C3
 *   accepted d1 (d2 rejected, t drawn from row 1 masked by C1) ⇒ carry on from C1.advance(t)
 *
 * The mask is ConstrainedDecoder.nextMask's rule, on GrammarMasks' public
 * API (the grammar helper was asked for a fork() there; until then this is
 * the one copy of the rule, checked against nextMask for every test schema):
 *
 *   budget = remaining − 2 (the token itself and the stop token after it)
 *   budget ≥ 0: mask(state, budget), plus the stop tokens when the state accepts
 *   budget < 0: only the stop tokens (the state must accept by then)
 *
 * so the budget narrowing to the shortest valid completion holds on every
 * speculative row as it does on plain decode steps.
 */
import { GrammarError, maskHas, type GrammarMasks, type MatcherState } from '../grammar/index.ts';

/** What speculative decoding needs of a token constraint. */
export interface TokenConstraint {
  /** Allowed next tokens (bitset over the vocabulary, stop tokens included when they may end the reply). Read only. */
  mask(): Uint32Array;
  /** The constraint after `token` (it must be allowed by mask()); this one is unchanged. */
  advance(token: number): TokenConstraint;
  /** A stop token ended the reply: nothing may follow. */
  readonly finished: boolean;
}

export class GrammarCursor implements TokenConstraint {
  private bits: Uint32Array | null = null;

  private constructor(
    private readonly masks: GrammarMasks,
    private readonly state: MatcherState,
    /** Tokens of max_tokens left, this position's included. */
    readonly remaining: number,
    private readonly stops: readonly number[],
    private readonly shared: { stopsOnly: Uint32Array | null },
  ) {}

  /** The start of a reply of at most `maxTokens` tokens (same budget check as ConstrainedDecoder). */
  static start(masks: GrammarMasks, maxTokens: number, stopTokens: readonly number[]): GrammarCursor {
    const state = masks.initial();
    if (masks.cost(state) + 1 > maxTokens) {
      throw new GrammarError('KVT_ERR_GRAMMAR_BUDGET', `max_tokens ${maxTokens} is too small: the shortest reply the schema allows takes ${masks.cost(state) + 1} tokens`);
    }
    const stops = stopTokens.filter((t) => t >= 0 && t < masks.vocab.size);
    return new GrammarCursor(masks, state, maxTokens, stops, { stopsOnly: null });
  }

  /** The reply ended (a stop token was taken). */
  get finished(): boolean {
    return this.state.stacks.length === 0;
  }

  mask(): Uint32Array {
    if (this.bits !== null) return this.bits;
    const budget = this.remaining - 2;
    const entry = budget >= 0 ? this.masks.mask(this.state, budget) : null;
    const accepts = entry !== null ? entry.accepts : this.masks.accepts(this.state);
    if (!accepts && (entry === null || entry.maxCost < 0)) {
      throw deadEnd(`no token continues the reply at grammar state ${this.state.key.slice(0, 80)} with ${this.remaining} tokens left`);
    }
    if (entry === null) {
      this.bits = this.shared.stopsOnly ??= (() => {
        const bits = new Uint32Array((this.masks.vocab.size + 31) >>> 5);
        for (const t of this.stops) bits[t >>> 5] |= 1 << (t & 31);
        return bits;
      })();
    } else this.bits = accepts ? this.masks.bitsWithStops(entry, this.stops) : entry.bits;
    return this.bits;
  }

  allows(token: number): boolean {
    return maskHas(this.mask(), token);
  }

  isStop(token: number): boolean {
    return this.stops.includes(token);
  }

  advance(token: number): GrammarCursor {
    if (!this.allows(token)) throw deadEnd(`token ${token} was not allowed by the mask`);
    const state = this.stops.includes(token) ? { stacks: [], key: '' } : this.masks.advanceToken(this.state, token);
    return new GrammarCursor(this.masks, state, this.remaining - 1, this.stops, this.shared);
  }
}

function deadEnd(detail: string): GrammarError {
  return new GrammarError('KVT_ERR_GRAMMAR_DEAD_END', `${detail}; the vocabulary cannot spell what the grammar needs — report the schema and model`);
}

/**
 * An n-gram draft cut before the first token the grammar rejects (and after a
 * stop token, which ends the reply), with the grammar at each position.
 */
export function cutToGrammar(tokens: readonly number[], start: TokenConstraint, stops: ReadonlySet<number>): { tokens: number[]; cursors: TokenConstraint[] } {
  const cursors = [start];
  const kept: number[] = [];
  for (const t of tokens) {
    const at = cursors[cursors.length - 1];
    if (!maskHas(at.mask(), t)) break;
    kept.push(t);
    cursors.push(at.advance(t));
    if (stops.has(t)) break;
  }
  return { tokens: kept, cursors };
}
