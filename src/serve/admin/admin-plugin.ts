/**
 * Every /admin/* route, in one encapsulated Fastify context whose onRequest
 * hook is the admin guard.
 *
 * Why a context and not a URL test: the router decodes the path
 * (`/%61dmin/stats`), accepts absolute-form request lines
 * (`GET http://host/admin/stats`) and normalises nothing else, so any test on
 * the raw `request.url` disagrees with it on some spelling. A hook of this
 * context runs for exactly the routes registered in it, after the router
 * chose one, so whatever spelling reached an admin route met the guard first.
 * The dashboard page is public HTML; its figures come from these routes.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';

import type { ServeContext } from '../context.ts';
import { registerAdminRoutes } from '../routes/admin.ts';
import { registerAdminApi } from './admin-routes.ts';
import type { AdminService } from './admin-service.ts';

export interface AdminPluginOptions {
  ctx: ServeContext;
  service: AdminService;
  /** After a successful policy edit, before its reply leaves (a client may use a class it just added in its very next request). */
  onPolicyChanged(): Promise<void>;
}

const POLICY_EDIT_ROUTES = new Set(['PUT /admin/policy', 'POST /admin/policy/edit']);

export function adminPlugin(options: AdminPluginOptions): FastifyPluginAsync {
  return async (scope: FastifyInstance) => {
    scope.addHook('onRequest', async (request) => options.ctx.auth.checkAdmin(request.headers));
    scope.addHook('onSend', async (request, reply, payload) => {
      if (reply.statusCode < 400 && POLICY_EDIT_ROUTES.has(`${request.method} ${request.routeOptions.url}`)) await options.onPolicyChanged();
      return payload;
    });
    registerAdminRoutes(scope, options.ctx);
    registerAdminApi(scope, options.service);
  };
}
