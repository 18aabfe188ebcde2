import type { NodeIndex } from './node-index.ts';
import type { AdoptedRecord } from './block-index-records.ts';
import { effectiveTtlMs, type BlockRecord, type MetadataPlane } from './metadata/metadata-plane.ts';
import type { PrefixChain } from './prefix-hasher.ts';
import type { RetentionPolicy } from './retention-policy.ts';

/** How long a plane's trust state is believed before asking again (wall ms): bounds how long a node misses blocks after the plane lost its data. */
const STATE_TTL_MS = 1000;

export interface PlaneProbe {
  /** Contiguous live blocks from `from` that the plane has records for (now in this node's index). */
  found: number;
  /** The plane can be trusted: a block it has no record of is not live. */
  trusted: boolean;
}

/**
 * KvTier's side of the metadata plane: the node's index is a cache in front
 * of it. A lookup asks the plane only for blocks the index lacks or holds as
 * expired; a hit renews in both; a write records in both; a removal by any
 * node (GC, purge) drops the block from this node's index and caches.
 */
/** What the plane records of a block this node wrote. */
export interface PlaneWrite {
  key: string;
  sizeBytes: number;
  trafficClass: string;
  tenant: string;
  depth: number;
  ttlMs?: number;
  /** 'tail' for a unit's tail (tier-units.ts); absent for a block. */
  kind?: 'tail';
}

export class PlaneLink {
  private trusted = false;
  private checkedAt = -Infinity;

  constructor(
    readonly plane: MetadataPlane,
    readonly owned: boolean,
    private readonly nodeId: string,
    private readonly index: NodeIndex,
    private readonly noteError: (error: unknown, what: string) => void,
    private readonly probeWindow: number,
  ) {}

  async isTrusted(): Promise<boolean> {
    if (Date.now() - this.checkedAt < STATE_TTL_MS) return this.trusted;
    try {
      this.trusted = (await this.plane.state()).trusted;
    } catch (error) {
      this.noteError(error, 'metadata plane unreachable; falling back to storage probes');
      this.trusted = false;
    }
    this.checkedAt = Date.now();
    return this.trusted;
  }

  /** After GC marked the plane trusted (or saw it lose data): believe it at once. */
  noteState(trusted: boolean): void {
    this.trusted = trusted;
    this.checkedAt = Date.now();
  }

  /** Windowed plane reads (8, 32, 128, … keys) from block `from`; adopts the live run into the index and renews it. */
  async probe(chain: PrefixChain, from: number, now: number, policy: RetentionPolicy): Promise<PlaneProbe> {
    const trusted = await this.isTrusted();
    // Windows save round trips to a remote plane; the embedded one answers in-process, so it starts at one key
    // (most probes end at their first key, a miss, which read a whole window of absent records).
    let window = this.plane.kind === 'lmdb' ? 1 : this.probeWindow;
    let position = from;
    const live: { record: BlockRecord; depth: number; keyBytes: Uint8Array }[] = [];
    while (position < chain.blockCount) {
      const end = Math.min(chain.blockCount, position + window);
      const keys: string[] = [];
      for (let i = position; i < end; i++) keys.push(chain.keyHex(i));
      let records: (BlockRecord | null)[];
      try {
        records = await this.plane.get(keys);
      } catch (error) {
        this.noteError(error, 'metadata plane get failed; treating the rest as the node index says');
        return { found: live.length, trusted: false };
      }
      let run = 0;
      while (run < records.length) {
        const record = records[run];
        if (record === null || record.lastUseAt + effectiveTtlMs(record, (c, t) => policy.ttlMs(c, t)) <= now) break;
        live.push({ record, depth: position + run, keyBytes: chain.keyBytes(position + run).slice() });
        run++;
      }
      position += run;
      if (run < records.length) break;
      window *= 4;
    }
    if (live.length > 0) {
      const adopted: AdoptedRecord[] = live.map(({ record, depth, keyBytes }) => ({
        keyBytes,
        sizeBytes: record.sizeBytes,
        trafficClass: record.trafficClass,
        tenant: record.tenant,
        depth,
        createdAt: record.createdAt,
        lastUseAt: now,
        ttlCapMs: record.ttlMs,
        kind: record.kind,
      }));
      await this.index.adoptRecords(adopted, policy);
      this.renew(
        live.map(({ record }) => record.key),
        now,
        live.map(({ depth }) => depth),
      );
    }
    return { found: live.length, trusted };
  }

  renew(keys: readonly string[], now: number, depths: readonly number[]): void {
    try {
      this.plane.renew(keys, now, depths);
    } catch (error) {
      this.noteError(error, 'metadata plane renew failed');
    }
  }

  /** The shared record of a block this node just put on storage. */
  recordWrite(write: PlaneWrite, now: number): Promise<void> {
    return this.recordWrites([{ ...write, at: now }]);
  }

  /** The shared records of blocks this node just put on storage, each used at its `at`: one plane call. */
  async recordWrites(writes: ReadonlyArray<PlaneWrite & { at: number }>): Promise<void> {
    try {
      await this.plane.upsert(
        writes.map((write) => ({
          key: write.key,
          trafficClass: write.trafficClass,
          tenant: write.tenant,
          sizeBytes: write.sizeBytes,
          writer: this.nodeId,
          createdAt: write.at,
          lastUseAt: write.at,
          ttlMs: write.ttlMs !== undefined && write.ttlMs > 0 ? Math.floor(write.ttlMs) : 0,
          depth: write.depth,
          ...(write.kind === 'tail' ? { kind: 'tail' as const } : {}),
        })),
      );
    } catch (error) {
      // The blobs are on storage without a record: an orphan GC sweeps after its grace period unless a rebuild adopts it.
      this.noteError(error, 'metadata plane record after a block write failed');
    }
  }

  /** A block found missing or corrupt on storage: its record is wrong for every node. */
  async forget(keys: readonly string[]): Promise<void> {
    await this.plane.remove(keys);
  }

  async close(): Promise<void> {
    try {
      await this.plane.flush();
    } catch (error) {
      this.noteError(error, 'flushing plane renewals at close failed');
    }
    if (this.owned) await this.plane.close();
  }
}
