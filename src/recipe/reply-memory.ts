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
 *
 * With a shared store (`SharedReplies`: Redis, when the server runs with
 * REDIS_URL or KVTIER_REDIS_CLUSTER) the memory is the cluster's, not this
 * process's: `share` writes a generated reply there too, and `load` fetches
 * the replies a transcript sends back that this process did not generate
 * (another API process served that turn) before the prompt is finished. The
 * local LRU stays in front of it. A shared store that fails or is slow only
 * leaves a reply to be re-encoded (fewer cached tokens), never an error.
 */
export class ReplyMemory {
  private readonly entries = new Map<string, Uint32Array>();
  private totalTokens = 0;

  constructor(
    private readonly maxTokens = 4_000_000,
    private readonly shared: SharedReplies | null = null,
  ) {}

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

  /**
   * Replies this process generated: remembered here and, with a shared store, there
   * (awaited, so a next turn sent anywhere after the reply was delivered finds it), unless
   * `sharedAlready`: the worker that sampled them wrote them there before it said the job was done. Never rejects.
   */
  async share(tenantScope: string, replies: ReadonlyArray<{ text: string; ids: ArrayLike<number> }>, sharedAlready = false): Promise<void> {
    const kept = replies.filter((reply) => reply.text !== '' && reply.ids.length > 0 && reply.ids.length <= this.maxTokens);
    for (const reply of kept) this.remember(tenantScope, reply.text, reply.ids);
    if (this.shared !== null && kept.length > 0 && !sharedAlready) await this.shared.save(tenantScope, kept);
  }

  /** Brings the replies among `texts` this process does not hold from the shared store, if any. Never rejects. */
  async load(tenantScope: string, texts: readonly string[]): Promise<void> {
    if (this.shared === null) return;
    const missing = [...new Set(texts)].filter((text) => text !== '' && !this.entries.has(entryKey(tenantScope, text)));
    if (missing.length === 0) return;
    const found = await this.shared.load(tenantScope, missing);
    missing.forEach((text, i) => {
      const ids = found[i];
      if (ids !== undefined) this.remember(tenantScope, text, ids);
    });
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

  async close(): Promise<void> {
    await this.shared?.close();
  }
}

/** A reply memory shared by every API process (src/serve/redis-reply-memory.ts). Neither call may reject. */
export interface SharedReplies {
  /** The ids of each text (same order), undefined where not held or where the store did not answer. */
  load(tenantScope: string, texts: readonly string[]): Promise<Array<Uint32Array | undefined>>;
  save(tenantScope: string, replies: ReadonlyArray<{ text: string; ids: ArrayLike<number> }>): Promise<void>;
  close(): Promise<void>;
}

function entryKey(tenantScope: string, text: string): string {
  return `${tenantScope}\u0000${text}`;
}
