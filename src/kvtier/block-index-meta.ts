/**
 * The block index's meta table: the per-scope counters ("bytes|<scope>",
 * "count|<scope>", equal to the sums over entries: the invariant drawn on
 * BlockIndex) and the version of the policy the stored expiries follow.
 * Counter moves happen inside the caller's LMDB transaction.
 */
import type { Database } from 'lmdb';

import type { IndexEntry } from './block-index-records.ts';
import { scopeTag } from './block-index-rows.ts';
import { ScopeCounterNames } from './metadata/scope-counter-names.ts';
import type { QuotaScope } from './retention-policy.ts';

export class IndexMeta {
  /** Set while a batch collects its counter moves (see batched). */
  private deltas: Map<string, number> | null = null;
  private readonly counterNames = new ScopeCounterNames('bytes', 'count');

  constructor(private readonly db: Database<number, string>) {}

  /** Counts `entry` into (sign 1) or out of (sign -1) its scopes, and the tails' tag for a unit tail. */
  count(entry: IndexEntry, sign: 1 | -1): void {
    const names = this.counterNames.of(entry);
    for (let i = 0; i < names.length; i += 2) {
      this.add(names[i], sign * entry.sizeBytes);
      this.add(names[i + 1], sign);
    }
  }

  /** Runs `body` with the counters moved once at its end, not once per entry (six reads and puts each). Inside a transaction only. */
  batched<T>(body: () => T): T {
    this.deltas = new Map();
    try {
      return body();
    } finally {
      const deltas = this.deltas;
      this.deltas = null;
      for (const [name, delta] of deltas) this.add(name, delta);
    }
  }

  bytesIn(scope: QuotaScope): number {
    return this.db.get(`bytes|${scopeTag(scope)}`) ?? 0;
  }

  countIn(scope: QuotaScope): number {
    return this.db.get(`count|${scopeTag(scope)}`) ?? 0;
  }

  /** Bytes and blocks per scope tag, from the counters (zeros left out). */
  usage(): { bytes: Record<string, number>; blocks: Record<string, number> } {
    const bytes: Record<string, number> = {};
    const blocks: Record<string, number> = {};
    for (const { key, value } of this.db.getRange({ snapshot: false })) {
      const name = String(key);
      if (name.startsWith('bytes|') && value !== 0) bytes[name.slice(6)] = value;
      else if (name.startsWith('count|') && value !== 0) blocks[name.slice(6)] = value;
    }
    return { bytes, blocks };
  }

  get policyVersion(): number | undefined {
    return this.db.get('policyVersion');
  }

  setPolicyVersion(version: number): Promise<boolean> {
    return this.db.put('policyVersion', version);
  }

  private add(name: string, delta: number): void {
    if (delta === 0) return;
    if (this.deltas !== null) {
      this.deltas.set(name, (this.deltas.get(name) ?? 0) + delta);
      return;
    }
    this.db.put(name, (this.db.get(name) ?? 0) + delta);
  }
}
