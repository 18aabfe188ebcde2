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
import type { AdminService } from '../../admin/index.ts';

export interface AdminPluginOptions {
  ctx: ServeContext;
  service: AdminService;
}

export function adminPlugin(options: AdminPluginOptions): FastifyPluginAsync {
  return async (scope: FastifyInstance) => {
    scope.addHook('onRequest', async (request) => options.ctx.auth.checkAdmin(request.headers));
    registerAdminRoutes(scope, options.ctx);
    registerAdminApi(scope, options.service);
  };
}
