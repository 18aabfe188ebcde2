import { scopeTagsOf, type BlockRecord } from './metadata-plane.ts';

/**
 * A store's counter names for a record's scope tags (scopeTagsOf), as
 * `<bytesPrefix>|<tag>`, `<countPrefix>|<tag>` pairs. The last answer is kept:
 * the records of one write batch mostly share class and tenant, and making the
 * six strings per record was a visible part of a write (#29's replay). Used by
 * the node index's counters and the LMDB plane's.
 */
export class ScopeCounterNames {
  private last: { trafficClass: string; tenant: string; tail: boolean; names: string[] } | null = null;

  constructor(
    private readonly bytesPrefix: string,
    private readonly countPrefix: string,
  ) {}

  /** [bytes name, count name] per tag, flattened. */
  of(record: Pick<BlockRecord, 'trafficClass' | 'tenant' | 'kind'>): readonly string[] {
    const tail = record.kind === 'tail';
    const last = this.last;
    if (last !== null && last.trafficClass === record.trafficClass && last.tenant === record.tenant && last.tail === tail) return last.names;
    const names = scopeTagsOf(record).flatMap((tag) => [`${this.bytesPrefix}|${tag}`, `${this.countPrefix}|${tag}`]);
    this.last = { trafficClass: record.trafficClass, tenant: record.tenant, tail, names };
    return names;
  }
}
