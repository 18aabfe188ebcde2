/**
 * The admin API beyond GET /admin/stats, GET|PUT /admin/policy and
 * POST /admin/gc (routes/admin.ts); both are registered inside the admin
 * plugin (admin-plugin.ts), whose hook checks KVTIER_ADMIN_TOKEN:
 *
 *   POST /admin/policy/edit        {op: setClass|setTenant|setCodec|reset|setGlobalQuota|setClientTtlMax, …} → {policy, applied}
 *   GET  /admin/stats/overview     figures for `kvtier stats` and the dashboard (one source)
 *   GET  /admin/stats/history      ?minutes=60 → chart series
 *   GET  /admin/blocks             ?tenant=&class=&olderThanMs=&limit=&stored=1 → BlockListing (stored=1: file size, encryption, codec of the first 50)
 *   GET  /admin/blocks/:key        → BlockDetail
 *   POST /admin/blocks/purge       {tenant?|class?|olderThanMs?|all?} → NDJSON progress, then PurgeReport
 *   POST /admin/gc/run             {dryRun} → NDJSON progress, then GcReport
 */
import type { FastifyInstance, FastifyReply } from 'fastify';

import { AdminError, parsePolicyEdit, type AdminService } from '../../admin/index.ts';
import { streamOperation } from './ndjson-stream.ts';

const MAX_LIST = 10_000;

function optionalString(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `${name} must be a non-empty string`, name);
  return value;
}

function optionalInt(query: Record<string, unknown>, name: string, min: number, max: number): number | undefined {
  const raw = query[name];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `${name} must be an integer in [${min}, ${max}], got ${String(raw)}`, name);
  return value;
}

/** Admin faults answer their own status; anything else goes to the app's error handler. */
async function guarded<T>(reply: FastifyReply, run: () => Promise<T>): Promise<T | FastifyReply> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof AdminError) return reply.status(error.status).send(error.body());
    throw error;
  }
}

function filterOf(source: Record<string, unknown>) {
  return {
    tenant: optionalString(source, 'tenant'),
    trafficClass: optionalString(source, 'class'),
    olderThanMs: optionalInt(source, 'olderThanMs', 1, Number.MAX_SAFE_INTEGER),
  };
}

export function registerAdminApi(app: FastifyInstance, admin: AdminService): void {
  app.post('/admin/policy/edit', async (request, reply) => guarded(reply, () => admin.editPolicy(parsePolicyEdit(request.body))));

  app.get('/admin/stats/overview', async (_request, reply) => guarded(reply, () => admin.overview()));

  app.get('/admin/stats/history', async (request, reply) =>
    guarded(reply, async () => {
      const minutes = optionalInt(request.query as Record<string, unknown>, 'minutes', 1, 7 * 24 * 60) ?? 60;
      return admin.history(minutes * 60_000);
    }),
  );

  app.get('/admin/blocks', async (request, reply) =>
    guarded(reply, async () => {
      const query = request.query as Record<string, unknown>;
      const limit = optionalInt(query, 'limit', 1, MAX_LIST) ?? 100;
      const stored = optionalInt(query, 'stored', 0, 1) === 1;
      return stored ? admin.blocks.listStored({ ...filterOf(query), limit }) : admin.blocks.list({ ...filterOf(query), limit });
    }),
  );

  app.get('/admin/blocks/:key', async (request, reply) => guarded(reply, () => admin.blocks.inspect((request.params as { key: string }).key)));

  app.post('/admin/blocks/purge', async (request, reply) =>
    guarded(reply, async () => {
      const body = (request.body ?? {}) as Record<string, unknown>;
      if (typeof body !== 'object' || Array.isArray(body)) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', 'send {tenant?, class?, olderThanMs?, all?}', 'body');
      const filter = { ...filterOf(body), all: body.all === true };
      // Validate before streaming, so a bad filter is a plain 400.
      admin.checkPurgeFilter(filter);
      return streamOperation(reply, (progress) => admin.purge(filter, progress));
    }),
  );

  app.post('/admin/gc/run', async (request, reply) =>
    guarded(reply, async () => {
      const body = (request.body ?? {}) as { dryRun?: unknown };
      if (body.dryRun !== undefined && typeof body.dryRun !== 'boolean') throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', 'dryRun must be true or false', 'dryRun');
      return streamOperation(reply, (progress) => admin.gc({ dryRun: body.dryRun === true }, progress));
    }),
  );
}
