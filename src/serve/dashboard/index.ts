/**
 * GET /dashboard: the operator's page (hit rate, cost, storage, GC, tenants,
 * engine economics), its script and styles, and uPlot served from
 * node_modules — no CDN, the page works on a closed network.
 *
 * The page is public HTML; every figure it shows comes from the admin API
 * (GET /admin/stats/overview, /admin/stats/history, /admin/blocks?stored=1), so it needs the admin
 * token: `/dashboard#token=…`, or typed into the page (kept in sessionStorage).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

import type { FastifyInstance } from 'fastify';

import type { Pricing } from '../../stats/index.ts';

const require = createRequire(import.meta.url);

interface Asset {
  body: string;
  type: string;
}

function asset(path: string | URL, type: string): Asset {
  return { body: readFileSync(path, 'utf8'), type };
}

export function registerDashboard(app: FastifyInstance, options: { pricing: Pricing }): void {
  const here = (name: string) => new URL(`./assets/${name}`, import.meta.url);
  const assets: Record<string, Asset> = {
    'dashboard.js': asset(here('dashboard.js'), 'text/javascript; charset=utf-8'),
    'dashboard.css': asset(here('dashboard.css'), 'text/css; charset=utf-8'),
    'uPlot.iife.min.js': asset(require.resolve('uplot/dist/uPlot.iife.min.js'), 'text/javascript; charset=utf-8'),
    'uPlot.min.css': asset(require.resolve('uplot/dist/uPlot.min.css'), 'text/css; charset=utf-8'),
  };
  const page = readFileSync(here('dashboard.html'), 'utf8').replace('__PRICING_SOURCE__', escapeHtml(options.pricing.source));

  app.get('/dashboard', async (_request, reply) => reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(page));
  app.get('/dashboard/', async (_request, reply) => reply.redirect('/dashboard'));
  app.get('/dashboard/assets/:name', async (request, reply) => {
    const found = Object.hasOwn(assets, (request.params as { name: string }).name) ? assets[(request.params as { name: string }).name] : undefined;
    if (!found) return reply.status(404).send({ error: { message: 'no such dashboard asset', type: 'not_found_error', param: 'name', code: 'KVT_ERR_ROUTE_NOT_FOUND', hint: 'open /dashboard' } });
    return reply.type(found.type).header('cache-control', 'public, max-age=300').send(found.body);
  });
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}
