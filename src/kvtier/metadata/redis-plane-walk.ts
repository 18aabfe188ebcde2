/**
 * The Redis plane's last-use walk: one page of one index after a cursor (a class index, or the
 * capped records), and the merge of every class index into one last-use order (eviction).
 */
import { mergeClassPages, type ClassScanPage } from './class-scan-merge.ts';
import type { BlockRecord, ScanOptions, ScanPage } from './metadata-plane.ts';
import { decodeValue, lruScore } from './redis-plane-codec.ts';
import type { RedisPlaneCommands } from './redis-plane-commands.ts';

export async function scanByLastUse(shards: readonly RedisPlaneCommands[], options: ScanOptions): Promise<ScanPage> {
  const limit = options.limit ?? 512;
  if (options.capped || options.trafficClass !== undefined) {
    const indexOf = (commands: RedisPlaneCommands) => (options.capped ? commands.keys.cap : commands.keys.use + options.trafficClass);
    if (shards.length === 1) return pageOf(await scanIndex(shards[0], indexOf(shards[0]), options, limit));
    // Every shard's index read from the same position, merged into one last-use order (as the classes below).
    return mergeClassPages(await Promise.all(shards.map((commands) => scanIndex(commands, indexOf(commands), options, limit))), limit, comparePositions);
  }
  const pages = await Promise.all(
    shards.map(async (commands) => {
      const classes = (await commands.call(() => commands.redis.smembers(commands.keys.classes))).sort();
      return Promise.all(classes.map((name) => scanIndex(commands, commands.keys.use + name, options, limit)));
    }),
  );
  return mergeClassPages(pages.flat(), limit, comparePositions);
}

/** One page of one last-use index after the cursor (positions are `score:member hex`). */
async function scanIndex(commands: RedisPlaneCommands, zset: string, options: ScanOptions, limit: number): Promise<ClassScanPage> {
  const maxScore = options.maxLastUseAt === undefined ? '+inf' : String(lruScore(options.maxLastUseAt, 0));
  let cursorScore = '';
  let cursorMember: Buffer = Buffer.alloc(0);
  if (options.cursor !== undefined) {
    const [score, member] = options.cursor.split(':');
    cursorScore = score;
    cursorMember = Buffer.from(member, 'hex');
  }
  const reply = (await commands.call(() => commands.scriptBuffer('kvtPlaneScan', zset, cursorScore, cursorMember, maxScore, String(limit), commands.keys.bucket))) as (Buffer | number | null)[];
  const rows: ClassScanPage['rows'] = [];
  for (let i = 1; i < reply.length; i += 3) {
    const key = (reply[i] as Buffer).toString('hex');
    const score = (reply[i + 1] as Buffer).toString();
    const value = reply[i + 2];
    rows.push({ position: `${score}:${key}`, record: value instanceof Buffer ? decodeValue(key, value, Number(score)) : null });
  }
  return { rows, more: Number(reply[0]) === 1 };
}

function pageOf(page: ClassScanPage): ScanPage {
  const records: BlockRecord[] = [];
  for (const row of page.rows) if (row.record !== null) records.push(row.record);
  // The cursor is the last row read (its record may be gone).
  const last = page.rows[page.rows.length - 1];
  return { records, cursor: page.more && last !== undefined ? last.position : undefined };
}

/** Walk order of positions `score:member hex`: score, then member bytes (as Redis orders equal scores). */
function comparePositions(a: string, b: string): number {
  const ca = a.indexOf(':');
  const cb = b.indexOf(':');
  const d = Number(a.slice(0, ca)) - Number(b.slice(0, cb));
  if (d !== 0) return d;
  const ma = a.slice(ca + 1);
  const mb = b.slice(cb + 1);
  return ma < mb ? -1 : ma > mb ? 1 : 0;
}

