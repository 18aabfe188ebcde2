/** /admin/*: cache stats, retention policy, GC. Registered only inside the admin plugin (src/serve/admin/admin-plugin.ts), whose hook checks KVTIER_ADMIN_TOKEN. */
import type { FastifyInstance } from 'fastify';

import type { PolicyPatch } from '../../workers/index.ts';
import type { ServeContext } from '../context.ts';
import { emptyBody, policyBody } from '../schemas.ts';

export function registerAdminRoutes(app: FastifyInstance, ctx: ServeContext): void {
  app.get('/admin/stats', async () => {
    const tier = await ctx.runner.admin({ op: 'stats' });
    return { model: ctx.modelId, fingerprint: ctx.fingerprint, runner: ctx.runner.status(), tier };
  });

  app.get('/admin/policy', async () => ctx.runner.admin({ op: 'getPolicy' }));

  // The body schema (schemas.ts policyBody) admits exactly a PolicyPatch with an optional `force`.
  app.put<{ Body: PolicyPatch & { force?: boolean } }>('/admin/policy', { schema: { body: policyBody } }, async (request) => ctx.runner.admin({ op: 'setPolicy', policy: request.body }));

  app.post('/admin/gc', { schema: { body: emptyBody } }, async () => ctx.runner.admin({ op: 'gc' }));
}
