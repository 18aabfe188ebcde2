/**
 * Remembers the exact token ids of replies this server generated, by the text
 * it returned. Re-encoding a generated reply does not always give back the ids
 * the model sampled (BPE merges differently than sampling chose), and a
 * single differing id breaks every cached block after it. When turn n+1 sends
 * turn n's reply back as an assistant message, the prompt builder asks this
 * memory first, so the next prompt starts with exactly the tokens whose KV the
 * worker stored.
 *
 * Bounded LRU by total remembered tokens; per tenant (a tenant's replies are
 * never used to build another tenant's prompt).
 */
export class ReplyMemory {
  private readonly entries = new Map<string, Uint32Array>();
  private totalTokens = 0;

  constructor(private readonly maxTokens = 4_000_000) {}

  remember(tenantScope: string, text: string, tokens: ArrayLike<number>): void {
    if (text === '' || tokens.length === 0 || tokens.length > this.maxTokens) return;
    const key = entryKey(tenantScope, text);
    const previous = this.entries.get(key);
    if (previous) {
      this.totalTokens -= previous.length;
      this.entries.delete(key);
    }
    // Its own copy, typed as the prompt it will be spliced into (4 bytes an id).
    this.entries.set(key, Uint32Array.from(tokens));
    this.totalTokens += tokens.length;
    for (const [oldKey, oldTokens] of this.entries) {
      if (this.totalTokens <= this.maxTokens) break;
      this.entries.delete(oldKey);
      this.totalTokens -= oldTokens.length;
    }
  }

  /** The remembered ids of `text`, refreshing its recency, or undefined. */
  recall(tenantScope: string, text: string): Uint32Array | undefined {
    const key = entryKey(tenantScope, text);
    const tokens = this.entries.get(key);
    if (tokens) {
      this.entries.delete(key);
      this.entries.set(key, tokens);
    }
    return tokens;
  }

  get size(): number {
    return this.entries.size;
  }
}

function entryKey(tenantScope: string, text: string): string {
  return `${tenantScope}\u0000${text}`;
}
