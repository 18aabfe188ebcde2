/** GET /v1/models, /healthz, /readyz, /metrics. */
import type { FastifyInstance } from 'fastify';

import { KvtError } from '../../errors.ts';
import type { ServeContext } from '../context.ts';
import { withTimeout } from '../../with-timeout.ts';

const serviceTimeout = (): Error => new KvtError('KVT_ERR_WORKER_TIMEOUT', 'no answer within 2000 ms');

export function registerServiceRoutes(app: FastifyInstance, ctx: ServeContext, startedAt: number): void {
  app.get('/v1/models', async (request) => {
    ctx.auth.identify(request.headers);
    const created = Math.floor(startedAt / 1000);
    return {
      object: 'list',
      data: [{ id: ctx.modelId, object: 'model', created, owned_by: 'kvtier', type: 'model', display_name: ctx.modelId, created_at: new Date(startedAt).toISOString(), context_length: ctx.contextLength, vocab_size: ctx.vocabSize }],
      has_more: false,
      first_id: ctx.modelId,
      last_id: ctx.modelId,
    };
  });

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    const status = ctx.runner.status();
    if (!status.ready) {
      void reply.header('retry-after', '2');
      return reply.status(503).send({ status: 'not_ready', runner: status, error: { code: 'KVT_ERR_SERVER_NOT_READY', message: status.detail ?? 'the job runner is not ready' } });
    }
    return { status: 'ready', runner: status, model: ctx.modelId };
  });

  app.get('/metrics', async (_request, reply) => {
    const status = ctx.runner.status();
    ctx.metrics.queueDepth.set(status.waiting);
    try {
      // The cluster's totals when the admin setup gave a source (counted once, at each event's source); else this runner's tier.
      const fromCluster = await withTimeout(ctx.metrics.refreshTierGauges(), 2000, serviceTimeout);
      const stats = fromCluster ? null : ((await withTimeout(ctx.runner.admin({ op: 'stats' }), 2000, serviceTimeout)) as { cache?: { bytesRead: number; bytesWritten: number; gc: { expired: { blocks: number }; evicted: { blocks: number } } } | null });
      if (stats?.cache) {
        ctx.metrics.storageBytes.set({ direction: 'read' }, stats.cache.bytesRead);
        ctx.metrics.storageBytes.set({ direction: 'written' }, stats.cache.bytesWritten);
        ctx.metrics.gcRemovals.set(stats.cache.gc.expired.blocks + stats.cache.gc.evicted.blocks);
      }
    } catch (error) {
      // Metrics still answer without the tier's figures; the failure is counted, not hidden.
      ctx.metrics.errors.inc({ code: (error as { code?: string }).code ?? 'KVT_ERR_INTERNAL' });
    }
    void reply.header('content-type', ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });
}
