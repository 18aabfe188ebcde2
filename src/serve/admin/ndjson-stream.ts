/**
 * Long admin operations (purge, GC) answer a stream of NDJSON lines so the
 * CLI can show progress while they run:
 *
 *   {"type":"progress", …AdminProgress}   (any number)
 *   {"type":"done","result":…}  or  {"type":"error","error":{code,message,hint}}   (exactly one, last)
 *
 * The HTTP status is 200 once streaming starts; a failure after that is the
 * final "error" line.
 */
import { PassThrough } from 'node:stream';

import type { FastifyReply } from 'fastify';

import { describeError } from '../../errors.ts';
import { AdminError, type AdminProgress } from '../../admin/index.ts';

export function streamOperation<T>(reply: FastifyReply, run: (progress: (p: AdminProgress) => void) => Promise<T>, heartbeatMs = 500): FastifyReply {
  const stream = new PassThrough();
  const startedAt = Date.now();
  let last: AdminProgress = { phase: 'start', scannedBlocks: 0, removedBlocks: 0, removedBytes: 0 };
  const write = (line: unknown) => stream.write(JSON.stringify(line) + '\n');
  const progress = (p: AdminProgress) => {
    last = p;
    write({ type: 'progress', ...p, elapsedMs: Date.now() - startedAt });
  };
  // Operations that report no progress of their own (GC inside the cache tier) still show they are alive.
  const heartbeat = setInterval(() => write({ type: 'progress', ...last, elapsedMs: Date.now() - startedAt }), heartbeatMs);
  run(progress).then(
    (result) => {
      clearInterval(heartbeat);
      write({ type: 'done', result });
      stream.end();
    },
    (error: unknown) => {
      clearInterval(heartbeat);
      const described = error instanceof AdminError ? { code: error.code, message: error.message, hint: error.hint } : describeError(error);
      write({ type: 'error', error: { code: described.code, message: described.message, hint: described.hint } });
      stream.end();
    },
  );
  return reply.type('application/x-ndjson').header('cache-control', 'no-store').send(stream);
}
