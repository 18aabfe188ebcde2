/**
 * How an operator gets into /admin/* and the dashboard.
 *
 *   KVTIER_ADMIN_TOKEN set        → that token, on any listener.
 *   unset, loopback listener      → a random token generated at start (this run only),
 *                                   and a one-time login link printed with the URL:
 *                                   GET /dashboard/login?code=… answers 302 to
 *                                   /dashboard#token=… once, then the code is spent.
 *   unset, any other listener     → no token: /admin/* stays refused (KVT_ERR_AUTH_ADMIN_DISABLED).
 *
 * Why a separate one-time code instead of printing /dashboard#token=…: the
 * printed line ends up in terminal scrollback, logs and browser history; a
 * spent code there opens nothing. The token itself is printed too, for the
 * `kvtier --url` commands (KVTIER_ADMIN_TOKEN). Jupyter does the same on
 * localhost. Only a loopback listener gets one: whoever can reach it is on
 * this machine already.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';

import type { FastifyInstance } from 'fastify';

import { KvtError } from '../errors.ts';
import { sendError } from './http-errors.ts';

/** 127.0.0.0/8, ::1 and localhost; 0.0.0.0, :: and every other address are not. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h);
  return mapped !== null && mapped[1].startsWith('127.');
}

export class AdminLogin {
  private code: string | null;

  private constructor(
    /** The admin token in force, null when the admin API is off. */
    readonly token: string | null,
    /** True when this run generated the token (no KVTIER_ADMIN_TOKEN, loopback listener). */
    readonly generated: boolean,
  ) {
    this.code = generated ? randomBytes(24).toString('base64url') : null;
  }

  static forListener(configured: string | null, host: string): AdminLogin {
    if (configured !== null) return new AdminLogin(configured, false);
    if (isLoopbackHost(host)) return new AdminLogin(randomBytes(32).toString('base64url'), true);
    return new AdminLogin(null, false);
  }

  /** The one-time link for a server at `address` (http://host:port), or null once spent or without a generated token. */
  loginUrl(address: string): string | null {
    return this.code === null ? null : `${address.replace(/\/$/, '')}/dashboard/login?code=${this.code}`;
  }

  /** What `kvtier serve` prints after the listening line. */
  banner(address: string): string {
    const dashboard = `${address.replace(/\/$/, '')}/dashboard`;
    if (this.generated) {
      return [
        `dashboard: ${dashboard}`,
        `  open once to log in: ${this.loginUrl(address)}`,
        `  admin token (generated for this run; KVTIER_ADMIN_TOKEN sets your own): ${this.token}`,
      ].join('\n');
    }
    if (this.token !== null) return `dashboard: ${dashboard} (log in with KVTIER_ADMIN_TOKEN)`;
    return `dashboard: ${dashboard} is off: /admin/* needs KVTIER_ADMIN_TOKEN on a non-loopback listener`;
  }

  /** GET /dashboard/login?code=…: the first correct code redirects to the dashboard with the token; any other is 401. */
  register(app: FastifyInstance): void {
    app.get('/dashboard/login', async (request, reply) => {
      const given = (request.query as { code?: unknown }).code;
      if (this.code === null || typeof given !== 'string' || !sameText(given, this.code) || this.token === null) {
        return sendError(request, reply, new KvtError('KVT_ERR_AUTH_ADMIN_TOKEN', 'this login link is not valid or was already used: a login link works once; open /dashboard and paste the admin token kvtier serve printed', { param: 'code' }));
      }
      this.code = null;
      return reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').redirect(`/dashboard#token=${encodeURIComponent(this.token)}`, 302);
    });
  }
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
