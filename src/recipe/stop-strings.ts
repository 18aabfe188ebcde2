/**
 * Stop strings over streamed text. `push(delta)` returns the text that is safe
 * to send (no stop string can start inside it) and whether a stop string was
 * hit; text from the stop string on is never sent (OpenAI and Anthropic both
 * leave the stop sequence out of the reply).
 */
import { partialSuffixLength } from './tool-calls.ts';

export class StopStringMatcher {
  private held = '';
  private stoppedOn: string | null = null;

  constructor(private readonly stops: readonly string[]) {}

  get stopped(): string | null {
    return this.stoppedOn;
  }

  push(delta: string): { text: string; stopped: string | null } {
    if (this.stoppedOn !== null) return { text: '', stopped: this.stoppedOn };
    if (this.stops.length === 0) return { text: delta, stopped: null };
    this.held += delta;
    let firstAt = -1;
    let firstStop: string | null = null;
    for (const stop of this.stops) {
      const at = this.held.indexOf(stop);
      if (at !== -1 && (firstAt === -1 || at < firstAt)) {
        firstAt = at;
        firstStop = stop;
      }
    }
    if (firstStop !== null) {
      const text = this.held.slice(0, firstAt);
      this.held = '';
      this.stoppedOn = firstStop;
      return { text, stopped: firstStop };
    }
    let keep = 0;
    for (const stop of this.stops) keep = Math.max(keep, partialSuffixLength(this.held, stop));
    const text = this.held.slice(0, this.held.length - keep);
    this.held = this.held.slice(this.held.length - keep);
    return { text, stopped: null };
  }

  /** End of the reply without a stop: the held tail was not a stop string after all. */
  flush(): string {
    const text = this.held;
    this.held = '';
    return this.stoppedOn === null ? text : '';
  }
}
