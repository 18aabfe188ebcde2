/**
 * What a request asks to change in the logits before the pick, applied to a
 * scratch copy (the model's logits are never modified):
 *
 *   x[j] += bias[j]                                        logit_bias (OpenAI: −100 bans, +100 forces in practice)
 *   x[j] −= c[j] × frequency + (c[j] > 0 ? presence : 0)    c[j] = times j was generated so far in this reply
 *   x[j] = x[j] > 0 ? x[j] / r : x[j] × r                   repetition penalty r over the recent window (llama.cpp)
 *
 * The first two lines are OpenAI's documented formula (additive, so their
 * order does not matter); they count generated tokens only, never the prompt,
 * as OpenAI and vLLM do. The multiplicative repetition penalty comes last, as
 * in vLLM's sampler.
 */
import { EngineError } from '../engine/engine-errors.ts';

export interface LogitAdjustOptions {
  /** [token id, bias] pairs; ids at or past the vocabulary are refused at the first pick. */
  logitBias?: ReadonlyArray<readonly [number, number]>;
  /** −2..2 (OpenAI's range): subtracted once from every token already generated. */
  presencePenalty?: number;
  /** −2..2: subtracted per time a token was generated. */
  frequencyPenalty?: number;
}

/** True when the options ask for any adjustment (a bias or a non-zero penalty). */
export function adjustsLogits(o: LogitAdjustOptions): boolean {
  return (o.logitBias?.length ?? 0) > 0 || (o.presencePenalty ?? 0) !== 0 || (o.frequencyPenalty ?? 0) !== 0;
}

export function checkLogitAdjust(o: LogitAdjustOptions): void {
  const bad = (what: string): never => {
    throw new EngineError('KVT_ERR_ENGINE_SAMPLING_OPTIONS', `${what}; fix the sampling options of the request`);
  };
  for (const [name, value] of [['presencePenalty', o.presencePenalty], ['frequencyPenalty', o.frequencyPenalty]] as const) {
    if (value !== undefined && (!Number.isFinite(value) || Math.abs(value) > 2)) bad(`${name} must be in [-2, 2], got ${value}`);
  }
  for (const pair of o.logitBias ?? []) {
    const [id, bias] = pair;
    if (!Number.isInteger(id) || id < 0) bad(`logit bias token ids must be integers ≥ 0, got ${id}`);
    if (!Number.isFinite(bias) || Math.abs(bias) > 100) bad(`logit bias values must be in [-100, 100], got ${bias} for token ${id}`);
  }
}

/** The per-reply state of the adjustments: bias table and counts of generated tokens. */
export class LogitAdjuster {
  private readonly biasIds: Int32Array;
  private readonly biasValues: Float32Array;
  private readonly presence: number;
  private readonly frequency: number;
  private readonly generated = new Map<number, number>();

  constructor(options: LogitAdjustOptions) {
    checkLogitAdjust(options);
    const pairs = options.logitBias ?? [];
    this.biasIds = Int32Array.from(pairs, ([id]) => id);
    this.biasValues = Float32Array.from(pairs, ([, bias]) => bias);
    this.presence = options.presencePenalty ?? 0;
    this.frequency = options.frequencyPenalty ?? 0;
    this.configured = adjustsLogits(options);
  }

  /** True when the request asked for any adjustment (bias or a non-zero penalty). */
  readonly configured: boolean;

  /** True when no adjustment would change a logit (the sampler then reads the model's logits as they are). */
  get idle(): boolean {
    return this.biasIds.length === 0 && ((this.presence === 0 && this.frequency === 0) || this.generated.size === 0);
  }

  /** Records a generated token (prompt tokens are not counted). */
  noteGenerated(token: number): void {
    if (this.presence === 0 && this.frequency === 0) return;
    this.generated.set(token, (this.generated.get(token) ?? 0) + 1);
  }

  /** Adds bias and penalties into `x` (a copy of the logits), in place. */
  apply(x: Float32Array): void {
    const vocab = x.length;
    for (let i = 0; i < this.biasIds.length; i++) {
      const id = this.biasIds[i];
      if (id >= vocab) throw new EngineError('KVT_ERR_ENGINE_SAMPLING_OPTIONS', `logit bias token id ${id} is outside the vocabulary (${vocab} tokens); fix the sampling options of the request`);
      x[id] += this.biasValues[i];
    }
    for (const [token, count] of this.generated) {
      if (token < vocab) x[token] -= count * this.frequency + this.presence;
    }
  }
}
