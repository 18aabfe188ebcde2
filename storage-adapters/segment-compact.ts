/**
 * Segment compaction: the space of deleted and overwritten values comes back.
 * A segment nobody appends to any more (sealed, or unsealed and untouched for
 * `abandonedMs`: its writer died) whose live records fill less than
 * `maxLiveFraction` of it has them copied, same key and same version, into a
 * segment born after every segment known, and is then unlinked.
 *
 * Invariants:
 * - Copies first, unlink after: every live value stays readable throughout.
 *   A reader elsewhere that still points into the unlinked segment finds it
 *   gone, rescans, and takes the copy (equal version, later birth wins:
 *   segment-catalog.ts), or a tombstone written meanwhile.
 * - A copy keeps its record's version, so a newer put or delete made on any
 *   node while compaction ran still wins over it.
 * - A tombstone is copied forward while any remaining segment may hold an
 *   older put of its key (a remaining segment whose smallest version is
 *   below it); otherwise it is dropped with its segment.
 * - Two nodes compacting at once copy twice (the copies tie; one wins) and
 *   unlink once; nothing is lost. kvtier runs it from its GC (one at a time).
 */
import type { Entry, Segment, SegmentCatalog } from './segment-catalog.ts';
import { KIND_PUT, KIND_TOMBSTONE } from './segment-format.ts';
import type { SegmentWriter } from './segment-writer.ts';

export interface CompactOptions {
  /** Segments whose live bytes are below this fraction of their size are rewritten. Default 0.5. */
  maxLiveFraction?: number;
  /** An unsealed segment untouched this long counts as abandoned. Default 1 h. */
  abandonedMs?: number;
  signal?: AbortSignal;
}

export interface CompactReport {
  segmentsRemoved: number;
  /** Bytes of the removed segments less the bytes copied out of them. */
  bytesReclaimed: number;
  recordsMoved: number;
  tombstonesKept: number;
  tombstonesDropped: number;
  /** Values whose CRC failed or could not be read: dropped with their segment (a later get is a miss). */
  unreadable: number;
}

export interface CompactDeps {
  catalog: SegmentCatalog;
  writer: SegmentWriter;
  /** The value of a live entry; undefined when its segment is gone. */
  readValue(key: string, entry: Entry): Promise<Uint8Array | undefined>;
  unlink(segment: Segment): Promise<void>;
}

/** Records copied per wait (bounds the values held at once). */
const MOVE_BATCH = 256;

export async function compactSegments(deps: CompactDeps, options: CompactOptions): Promise<CompactReport> {
  const { catalog, writer } = deps;
  const maxLiveFraction = options.maxLiveFraction ?? 0.5;
  const abandonedMs = options.abandonedMs ?? 60 * 60 * 1000;
  const report: CompactReport = { segmentsRemoved: 0, bytesReclaimed: 0, recordsMoved: 0, tombstonesKept: 0, tombstonesDropped: 0, unreadable: 0 };
  const now = Date.now();
  const active = writer.activeSegment();
  const segments = [...catalog.segments.values()].filter((segment) => !segment.gone);
  const candidates = new Set(
    segments.filter(
      (segment) => segment !== active && segment.scanned > 0 && (segment.sealed || now - segment.mtimeMs > abandonedMs) && segment.liveBytes < maxLiveFraction * segment.scanned,
    ),
  );
  if (candidates.size === 0) return report;
  await writer.roll(Math.max(...segments.map((segment) => segment.birth)));
  const groups = new Map<Segment, Array<[string, Entry]>>();
  for (const segment of candidates) groups.set(segment, []);
  for (const [key, entry] of catalog.entries) groups.get(entry.segment)?.push([key, entry]);
  const oldestRemaining = Math.min(...segments.filter((segment) => !candidates.has(segment)).map((segment) => segment.minVersion));
  for (const [segment, group] of groups) {
    if (options.signal?.aborted) break;
    let moved = 0;
    const moves: Promise<void>[] = [];
    for (const [key, entry] of group) {
      if (entry.kind === KIND_TOMBSTONE) {
        if (entry.version > oldestRemaining) {
          moves.push(writer.append(KIND_TOMBSTONE, key, null, entry.version));
          report.tombstonesKept++;
        } else {
          catalog.drop(key, entry);
          report.tombstonesDropped++;
        }
        continue;
      }
      let value: Uint8Array | undefined;
      try {
        value = await deps.readValue(key, entry);
      } catch {
        report.unreadable++;
        continue;
      }
      if (value === undefined) continue;
      moves.push(writer.append(KIND_PUT, key, value, entry.version));
      moved += entry.size;
      report.recordsMoved++;
      if (moves.length >= MOVE_BATCH) await Promise.all(moves.splice(0));
    }
    await Promise.all(moves);
    const size = segment.scanned;
    await deps.unlink(segment);
    report.segmentsRemoved++;
    report.bytesReclaimed += Math.max(0, size - moved);
  }
  return report;
}
