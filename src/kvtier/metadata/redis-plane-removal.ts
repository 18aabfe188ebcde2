/**
 * Removal in the Redis plane: judged removal of given keys (REMOVE_LUA), the batch take of a class's
 * oldest rows (REMOVE_OLDEST_LUA), and the pending-delete journal they write. The callers tell
 * listeners and other nodes; these return what went, with the members as raw bytes for that message.
 */
import { PlaneError } from '../errors.ts';
import type { BlockRecord, PlaneUsage, RemovedBatch, RemoveOptions } from './metadata-plane.ts';
import { DEPTH_SLOTS, decodeValue, lruScore, memberOf, splitMembers } from './redis-plane-codec.ts';
import type { RedisPlaneCommands } from './redis-plane-commands.ts';

/** Keys per script call of a judged removal. */
const MEMBERS_PER_COMMAND = 1024;

export async function removeRecords(commands: RedisPlaneCommands, keys: readonly string[], options: RemoveOptions): Promise<BlockRecord[]> {
  const removed: BlockRecord[] = [];
  const judged = options.judgedLastUseAt;
  if (judged !== undefined && judged.length !== keys.length) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `remove: ${judged.length} judged last uses for ${keys.length} keys`);
  const k = commands.keys;
  // Every chunk's script goes in one pipeline: one round trip per remove, however many chunks.
  const pipeline = commands.pipeline();
  let chunks = 0;
  for (let i = 0; i < keys.length; i += MEMBERS_PER_COMMAND) {
    const args: (string | Buffer)[] = [k.cap, k.usage, k.classes, k.bucket, k.use, options.journal ? k.pendingBatches : ''];
    for (let j = i; j < Math.min(keys.length, i + MEMBERS_PER_COMMAND); j++) {
      // A last use ≤ judged is a score < lruScore(judged + 1, deepest): whatever its depth.
      args.push(memberOf(keys[j]), judged === undefined ? '' : String(lruScore(judged[j] + 1, DEPTH_SLOTS - 1)));
    }
    pipeline.kvtPlaneRemoveBuffer(...args);
    chunks++;
  }
  if (chunks === 0) return removed;
  const results = await commands.call(() => pipeline.exec());
  for (const [error, reply] of results ?? []) {
    if (error !== null) throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `metadata plane (Redis) remove failed: ${error.message}`, { cause: error });
    const rows = reply as Buffer[];
    for (let j = 0; j < rows.length; j += 3) removed.push(decodeValue(rows[j].toString('hex'), rows[j + 1], Number(rows[j + 2].toString())));
  }
  return removed;
}

/** `removeByLastUse`; `members` holds the removed keys' raw bytes concatenated. */
export async function removeOldest(
  commands: RedisPlaneCommands,
  options: { trafficClass: string; maxLastUseAt: number; limit: number; journal?: boolean },
): Promise<RemovedBatch & { members: Buffer }> {
  const k = commands.keys;
  const reply = (await commands.call(() =>
    commands.scriptBuffer(
      'kvtPlaneRemoveOldest',
      k.cap,
      k.usage,
      k.classes,
      k.bucket,
      k.use,
      options.trafficClass,
      String(lruScore(options.maxLastUseAt, 0)),
      String(options.limit),
      options.journal ? k.pendingBatches : '',
    ),
  )) as [number, Buffer, ...(Buffer | number)[]];
  // [rows taken, members concatenated, then tag, bytes, blocks per usage delta (negative: freed)]
  const members = reply[1];
  const freed: PlaneUsage = { bytes: {}, blocks: {} };
  for (let j = 2; j + 2 < reply.length; j += 3) {
    const tag = (reply[j] as Buffer).toString();
    if (reply[j + 1] !== 0) freed.bytes[tag] = -Number(reply[j + 1]);
    if (reply[j + 2] !== 0) freed.blocks[tag] = -Number(reply[j + 2]);
  }
  return { keys: splitMembers(members), members, freed, more: Number(reply[0]) === options.limit };
}

/** The journal: batches (one member per removal call, keys concatenated) and single keys; split, deduplicated. */
export async function pendingDeletes(commands: RedisPlaneCommands): Promise<string[]> {
  const [batches, singles] = (await commands.call(() =>
    Promise.all([commands.redis.smembersBuffer(commands.keys.pendingBatches), commands.redis.smembersBuffer(commands.keys.pending)]),
  )) as [Buffer[], Buffer[]];
  return [...new Set([...batches, ...singles].flatMap(splitMembers))];
}

export async function clearPendingDeletes(commands: RedisPlaneCommands, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  const blob = Buffer.from(keys.join(''), 'hex');
  if (blob.length !== keys.length * 16) for (const key of keys) memberOf(key); // names the malformed key
  await commands.call(() => commands.script('kvtPlaneClearPending', commands.keys.pendingBatches, commands.keys.pending, blob));
}
