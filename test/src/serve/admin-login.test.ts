/**
 * A newcomer's first minute: `kvtier serve` on a loopback listener with no
 * KVTIER_ADMIN_TOKEN prints the dashboard URL and a one-time login link that
 * opens it; the admin API answers the generated token; the link works once.
 * A non-loopback listener without a token keeps the admin API off.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { isLoopbackHost } from '../../../src/serve/admin-login.ts';
import { ROOT } from '../cli/cli-runner.ts';
import { startTestServer, type TestServer } from './server-fixture.ts';

const started: ChildProcess[] = [];
const servers: TestServer[] = [];
afterAll(async () => {
  for (const child of started) if (child.exitCode === null) child.kill('SIGTERM');
  for (const server of servers) await server.close();
});

/** Starts `kvtier serve` and resolves with its stderr once the banner (three lines after "kvtier serving") is out. */
function serve(args: string[]): Promise<{ child: ChildProcess; stderr: string }> {
  const child = spawn(process.execPath, ['bin/kvtier.js', 'serve', ...args], {
    cwd: ROOT,
    env: { ...process.env, KVTIER_ADMIN_TOKEN: undefined, KVTIER_DATA_DIR: undefined, REDIS_URL: undefined, KVTIER_API_KEYS: undefined },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  started.push(child);
  return new Promise((resolve, reject) => {
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (/admin token \(generated[^\n]*\n/.test(stderr)) resolve({ child, stderr });
    });
    child.once('exit', (code) => reject(new Error(`kvtier serve exited ${code}: ${stderr}`)));
  });
}

describe('the admin login on a loopback listener without KVTIER_ADMIN_TOKEN', () => {
  it('kvtier serve prints the dashboard URL and a login link that opens it once; the admin API takes the generated token', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-login-'));
    const { stderr } = await serve(['--host', '127.0.0.1', '--port', '0', '--model', 'synthetic:tiny', '--data-dir', dataDir, '--threads', '1']);
    const address = /kvtier serving \S+ on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1];
    expect(address, stderr).toBeDefined();
    expect(stderr).toContain(`dashboard: ${address}/dashboard\n`);
    const link = /open once to log in: (\S+)/.exec(stderr)?.[1];
    const printedToken = /admin token \(generated[^)]*\): (\S+)/.exec(stderr)?.[1];
    expect(link).toMatch(new RegExp(`^${address}/dashboard/login\\?code=[A-Za-z0-9_-]{20,}$`));
    expect(printedToken).toMatch(/^[A-Za-z0-9_-]{40,}$/);

    // Without the token the admin API refuses.
    expect((await fetch(`${address}/admin/stats/overview`)).status).toBe(401);

    // The link: a redirect to the dashboard carrying the token in the fragment (never sent to a server or logged).
    const first = await fetch(link!, { redirect: 'manual' });
    expect(first.status).toBe(302);
    expect(first.headers.get('cache-control')).toBe('no-store');
    const location = first.headers.get('location')!;
    expect(location.startsWith('/dashboard#token=')).toBe(true);
    const token = decodeURIComponent(location.slice('/dashboard#token='.length));
    expect(token).toBe(printedToken);
    expect((await fetch(`${address}/dashboard`)).status).toBe(200);
    const overview = await fetch(`${address}/admin/stats/overview`, { headers: { authorization: `Bearer ${token}` } });
    expect(overview.status).toBe(200);

    // Spent: the same link opens nothing now; a made-up code neither.
    const again = await fetch(link!, { redirect: 'manual' });
    expect(again.status).toBe(401);
    expect(((await again.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: 'KVT_ERR_AUTH_ADMIN_TOKEN', param: 'code' });
    expect((await fetch(`${address}/dashboard/login?code=nope`, { redirect: 'manual' })).status).toBe(401);
  }, 120_000);
});

describe('a listener that is not loopback, without KVTIER_ADMIN_TOKEN', () => {
  it('keeps the admin API off and has no login link', async () => {
    // Configured for 0.0.0.0 (the decision is the configured host's); the test itself only ever binds loopback.
    const server = await startTestServer({ host: '0.0.0.0', adminToken: null });
    servers.push(server);
    expect(server.built.adminLogin.token).toBeNull();
    expect(server.built.adminLogin.loginUrl(server.url)).toBeNull();
    expect(server.built.adminLogin.banner(server.url)).toContain('needs KVTIER_ADMIN_TOKEN');
    const refused = await fetch(`${server.url}/admin/stats/overview`, { headers: { authorization: 'Bearer anything' } });
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('KVT_ERR_AUTH_ADMIN_DISABLED');
    expect((await fetch(`${server.url}/dashboard/login?code=x`, { redirect: 'manual' })).status).toBe(401);
  });

  it('a configured token is used as is and no link is made', async () => {
    const server = await startTestServer({ adminToken: 'mine' });
    servers.push(server);
    expect(server.built.adminLogin).toMatchObject({ token: 'mine', generated: false });
    expect(server.built.adminLogin.loginUrl(server.url)).toBeNull();
  });

  it('loopback is 127.0.0.0/8, ::1 and localhost only', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1']) expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.2', 'example.com', '128.0.0.1', '::ffff:10.0.0.1']) expect(isLoopbackHost(host), host).toBe(false);
  });
});
