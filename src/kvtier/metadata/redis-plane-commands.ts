/**
 * The Redis plane's commands: its Lua scripts registered on a connection, and every call wrapped so a
 * closed plane and an unreachable Redis surface as typed PlaneErrors.
 */

import { PlaneError } from '../errors.ts';
import type { RedisClient } from '../redis-connection.ts';
import type { PlaneKeys } from './redis-plane-codec.ts';
import { GET_LUA, MARK_TRUSTED_LUA, NOTE_ORPHANS_LUA, RENEW_LUA, SCAN_LUA } from './redis-plane-read-scripts.ts';
import { CLEAR_PENDING_LUA, REMOVE_LUA, REMOVE_OLDEST_LUA, UPSERT_LUA } from './redis-plane-write-scripts.ts';

/** A pipeline that also takes the scripts by name (`kvtPlaneRemoveBuffer(...)`). */
export type ScriptPipeline = Record<string, (...args: (string | Buffer)[]) => unknown> & { exec(): Promise<[Error | null, unknown][] | null> };

/** Registers the plane's scripts on `redis` (sent by SHA, loaded on first use). */
export function defineScripts(redis: RedisClient): void {
  for (const [name, lua, numberOfKeys] of [
    ['kvtPlaneUpsert', UPSERT_LUA, 3],
    ['kvtPlaneRemove', REMOVE_LUA, 3],
    ['kvtPlaneRemoveOldest', REMOVE_OLDEST_LUA, 3],
    ['kvtPlaneGet', GET_LUA, 2],
    ['kvtPlaneRenew', RENEW_LUA, 2],
    ['kvtPlaneScan', SCAN_LUA, 1],
    ['kvtPlaneNoteOrphans', NOTE_ORPHANS_LUA, 1],
    ['kvtPlaneMarkTrusted', MARK_TRUSTED_LUA, 1],
    ['kvtPlaneClearPending', CLEAR_PENDING_LUA, 2],
  ] as const) {
    redis.defineCommand(name, { lua, numberOfKeys });
  }
}

export class RedisPlaneCommands {
  closed = false;

  constructor(
    readonly redis: RedisClient,
    readonly keys: PlaneKeys,
  ) {}

  script(name: string, ...args: (string | Buffer)[]): Promise<unknown> {
    return (this.redis as unknown as Record<string, (...a: (string | Buffer)[]) => Promise<unknown>>)[name](...args);
  }

  /** The script with Buffer replies (binary members and values). */
  scriptBuffer(name: string, ...args: (string | Buffer)[]): Promise<unknown> {
    return (this.redis as unknown as Record<string, (...a: (string | Buffer)[]) => Promise<unknown>>)[`${name}Buffer`](...args);
  }

  pipeline(): ScriptPipeline {
    return this.redis.pipeline() as unknown as ScriptPipeline;
  }

  async call<T>(run: () => Promise<T>): Promise<T> {
    if (this.closed) throw new PlaneError('KVT_ERR_PLANE_CLOSED', 'this metadata plane is closed; open a new one');
    try {
      return await run();
    } catch (error) {
      if (error instanceof PlaneError) throw error;
      throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `metadata plane (Redis) failed: ${(error as Error).message}`, { cause: error });
    }
  }
}
