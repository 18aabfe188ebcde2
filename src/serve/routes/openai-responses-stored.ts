/**
 * The stored-response routes of the Responses API, each tenant-scoped (another
 * tenant's id is a 404):
 *
 *   GET    /v1/responses/{id}               the response (a background run here: its live state);
 *                                           ?stream=true&starting_after=N re-reads a background run's
 *                                           events while this process holds them
 *   GET    /v1/responses/{id}/input_items   the items it was generated from, paginated (responses-items.ts)
 *   DELETE /v1/responses/{id}               drops it (a background run still going is cancelled)
 *   POST   /v1/responses/{id}/cancel        cancels a background run: status "cancelled", the engine
 *                                           sequence freed; a finished one is returned as it is. A run in
 *                                           another API process (REDIS_URL) is reached through the store:
 *                                           that process polls for the mark, cancels and settles the record
 *
 * DELETE of a run going on in another process works the same way: its process
 * sees the record gone, stops the run and does not write it back.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

import { KvtError } from '../../errors.ts';
import { listPage, parseInclude, parseListQuery, reasoningToken, type ResponsesOutputItem } from '../../recipe/index.ts';
import type { ServeContext } from '../context.ts';
import { requestIdentity } from '../request-limits.ts';
import type { ResponseStore } from '../response-store.ts';
import { streamRun, type ResponseRun, type ResponseRuns } from '../response-run.ts';

type IdRequest = FastifyRequest<{ Params: { id: string }; Querystring: Record<string, unknown> }>;

export function notFound(id: string, param: string): KvtError {
  return new KvtError('KVT_ERR_RESPONSE_NOT_FOUND', `no stored response "${id}" for this API key`, { param });
}

/** How long a cancel that reached another API process waits for the run's process to settle the record. */
const CANCEL_WAIT_MS = 5000;

const running = (response: Record<string, unknown>): boolean => response.status === 'queued' || response.status === 'in_progress';

function invalid(message: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

/** Stops a run still going and waits until its record is settled. */
async function cancelRun(run: ResponseRun): Promise<void> {
  if (!run.finished) {
    run.cancelled = true;
    run.abort.abort(new KvtError('KVT_ERR_INTERNAL', 'cancelled by POST /v1/responses/{id}/cancel'));
  }
  await run.done;
}

export function registerStoredResponses(app: FastifyInstance, ctx: ServeContext, store: ResponseStore, runs: ResponseRuns): void {
  app.get('/v1/responses/:id', async (request: IdRequest, reply: FastifyReply) => {
    const identity = requestIdentity(ctx, request);
    const { id } = request.params;
    const include = parseInclude(request.query['include[]'] ?? request.query.include);
    const run = runs.get(identity.tenant, id);
    if (request.query.stream === 'true') {
      if (!run) throw invalid(`response "${id}" has no event stream held by this server: only a background response, while it runs here and for a minute after, can be streamed again; GET it without stream`, 'stream');
      const after = request.query.starting_after === undefined ? -1 : Number(request.query.starting_after);
      if (!Number.isInteger(after) || after < -1) throw invalid('starting_after must be an event sequence_number (an integer ≥ 0)', 'starting_after');
      await streamRun(reply, run, after);
      return reply;
    }
    const response = run && !run.deleted ? run.snapshot() : (await store.get(identity.tenant, id))?.response;
    if (!response) throw notFound(id, 'id');
    return include.reasoningToken ? withReasoningTokens(response) : response;
  });

  app.get('/v1/responses/:id/input_items', async (request: IdRequest) => {
    const identity = requestIdentity(ctx, request);
    const query = parseListQuery(request.query);
    const record = await store.get(identity.tenant, request.params.id);
    if (!record) throw notFound(request.params.id, 'id');
    return listPage(record.inputItems ?? [], query);
  });

  app.delete('/v1/responses/:id', async (request: IdRequest) => {
    const identity = requestIdentity(ctx, request);
    const run = runs.get(identity.tenant, request.params.id);
    if (run) {
      run.deleted = true;
      await cancelRun(run);
    }
    if (!(await store.delete(identity.tenant, request.params.id))) throw notFound(request.params.id, 'id');
    return { id: request.params.id, object: 'response.deleted', deleted: true };
  });

  app.post('/v1/responses/:id/cancel', async (request: IdRequest) => {
    const identity = requestIdentity(ctx, request);
    const { id } = request.params;
    const run = runs.get(identity.tenant, id);
    if (run && !run.deleted) {
      await cancelRun(run);
      return run.snapshot();
    }
    const record = await store.get(identity.tenant, id);
    if (!record) throw notFound(id, 'id');
    if (record.response.background !== true) throw invalid(`response "${id}" was not created with background: true; only background responses can be cancelled`, 'id');
    if (!running(record.response)) return record.response;
    // Another API process runs it (REDIS_URL): leave the mark it polls for, and wait for it to settle the record.
    await store.requestCancel(identity.tenant, id, ctx.config.requestTimeoutMs);
    const deadline = Date.now() + CANCEL_WAIT_MS;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const now = await store.get(identity.tenant, id);
      if (!now) throw notFound(id, 'id');
      // Past the wait (its process is gone or stuck) the mark stays, and the answer is the record as it is.
      if (!running(now.response) || Date.now() > deadline) return now.response;
    }
  });
}

/** include: ["reasoning.encrypted_content"] on GET: the stored reasoning items with their token. */
function withReasoningTokens(response: Record<string, unknown>): Record<string, unknown> {
  const output = (response.output as ResponsesOutputItem[]).map((item) =>
    item.type === 'reasoning' && item.encrypted_content === undefined ? { ...item, encrypted_content: reasoningToken(item.content.map((part) => part.text).join('')) } : item,
  );
  return { ...response, output };
}
