/**
 * Shared pieces of the bad-input sweep (bad-input-*.test.ts): request bodies
 * of each generate route, a sender that takes objects, raw strings or bytes,
 * and the two assertions every case makes — a 4xx whose JSON error body names
 * the field or limit (never a 5xx), and a server that still answers a valid
 * request afterwards.
 */
import { request as httpRequest } from 'node:http';

import { expect } from 'vitest';

import { KEYS } from './server-fixture.ts';

export const MODEL = 'synthetic:tiny';
export const AUTH = { authorization: `Bearer ${KEYS.alice}` } as const;

export type Route = '/v1/chat/completions' | '/v1/completions' | '/v1/messages' | '/v1/responses';
export const GENERATE_ROUTES: readonly Route[] = ['/v1/chat/completions', '/v1/completions', '/v1/messages', '/v1/responses'];

/** A valid body of `route` with `extra` fields laid over it. */
export function validBody(route: Route, extra: Record<string, unknown> = {}): Record<string, unknown> {
  switch (route) {
    case '/v1/chat/completions':
      return { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra };
    case '/v1/completions':
      return { model: MODEL, prompt: 'hi', max_tokens: 2, ...extra };
    case '/v1/messages':
      return { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra };
    case '/v1/responses':
      return { model: MODEL, input: 'hi', max_output_tokens: 2, ...extra };
  }
}

export interface Reply {
  status: number;
  text: string;
  json: Record<string, unknown> | null;
}

/**
 * One request. `body`: an object (sent as JSON), a string or bytes (sent as
 * they are), or undefined. Header values '' are left out. Sent with
 * node:http, so bytes that are not UTF-8 go out unchanged.
 */
export function send(url: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const all: Record<string, string> = { ...AUTH, ...(payload ? { 'content-type': 'application/json' } : {}), ...headers };
  for (const key of Object.keys(all)) if (all[key] === '') delete all[key];
  if (payload) all['content-length'] = String(payload.length);
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, method, headers: all }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: Record<string, unknown> | null = null;
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch {
          json = null;
        }
        resolve({ status: res.statusCode ?? 0, text, json });
      });
      res.on('error', reject);
    });
    // The server may answer (401, 413) and close before the body is all sent.
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error)));
    req.end(payload);
  });
}

export interface ErrorFields {
  code: string;
  param: string | null;
  message: string;
  type: string;
}

/** The error of an OpenAI (`{error: {...}}`) or Anthropic (`{type: 'error', error: {...}}`) body. */
export function errorOf(reply: Reply): ErrorFields {
  expect(reply.json, `not a JSON body: ${reply.text.slice(0, 200)}`).not.toBeNull();
  const error = reply.json!.error as ErrorFields | undefined;
  expect(error, `no error in ${reply.text.slice(0, 200)}`).toBeDefined();
  return error!;
}

/**
 * A 4xx (the `status` given) whose JSON error has `code`, and whose param
 * (or, with `mentions`, whose message) names the field or limit.
 */
export function expectRefused(reply: Reply, status: number, expected: { code: string; param?: string | RegExp | null; mentions?: string | RegExp }, label = ''): ErrorFields {
  expect(reply.status, `${label}: ${reply.text.slice(0, 300)}`).toBe(status);
  const error = errorOf(reply);
  expect(error.code, label).toBe(expected.code);
  if (expected.param !== undefined) {
    if (expected.param instanceof RegExp) expect(error.param, label).toMatch(expected.param);
    else expect(error.param, label).toBe(expected.param);
  }
  if (expected.mentions !== undefined) expect(error.message, label).toMatch(expected.mentions);
  return error;
}

/** The server answers /healthz and a valid chat completion. */
export async function expectStillServes(url: string): Promise<void> {
  expect((await send(url, 'GET', '/healthz')).status).toBe(200);
  const reply = await send(url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions'));
  expect(reply.status, reply.text.slice(0, 300)).toBe(200);
  expect((reply.json!.choices as unknown[]).length).toBe(1);
}
