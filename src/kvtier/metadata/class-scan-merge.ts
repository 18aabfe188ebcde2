/**
 * The unfiltered last-use walk over per-class indexes: every class index is
 * read from the same position and the pages are merged into one last-use
 * order (LRU eviction). Classes are few (policy classes), so reading `limit`
 * rows from each costs little next to the eviction it serves.
 */
import type { BlockRecord } from './metadata-plane.ts';

/** One row of a class index: its position in the walk order and its record (null: row without record). */
export interface ClassScanRow {
  position: string;
  record: BlockRecord | null;
}

export interface ClassScanPage {
  /** Rows in walk order, all after the shared cursor. */
  rows: ClassScanRow[];
  /** This class index has rows after its last one. */
  more: boolean;
}

/**
 * Merges class pages read from one cursor into the first `limit` rows of
 * the walk. `compare` orders positions as the walk does. The next cursor is
 * the last row taken; undefined when no class has rows left.
 *
 * Why taking `limit` is safe: a class page that stopped early (`more`)
 * holds `limit` rows itself, so every row it did not return sorts after the
 * `limit`-th merged row.
 */
export function mergeClassPages(pages: readonly ClassScanPage[], limit: number, compare: (a: string, b: string) => number): { records: BlockRecord[]; cursor: string | undefined } {
  const rows = pages.flatMap((page) => page.rows).sort((a, b) => compare(a.position, b.position));
  const taken = rows.slice(0, limit);
  const more = rows.length > limit || pages.some((page) => page.more);
  const records: BlockRecord[] = [];
  for (const row of taken) if (row.record !== null) records.push(row.record);
  return { records, cursor: more && taken.length > 0 ? taken[taken.length - 1].position : undefined };
}
