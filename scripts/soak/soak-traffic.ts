/**
 * Mixed soak traffic against a kvtier server: valid chat / completions /
 * messages / responses requests, streamed and not, clients that hang up
 * mid-stream, and invalid ones (no key, broken JSON, wrong types, absurd
 * numbers, unknown routes). A seeded generator picks each request, so a run
 * reproduces from its seed; a window summarises latency and status classes.
 */
import { seededRandom } from '../../test/fuzz/fuzz-runner.ts';
import { SOAK_KEY } from './soak-server.ts';

const WORDS = ['alpha', 'bravo', 'cache', 'delta', 'echo', 'prefix', 'block', 'tier', 'shared', 'token', 'page', 'kv', 'store', 'load', 'hash', 'seal', 'lorem', 'ipsum', 'zeta', 'omega'];

interface Planned {
  kind: string;
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  stream: boolean;
  /** Hang up after the first streamed chunk. */
  disconnect: boolean;
}

export interface WindowStats {
  window: number;
  requests: number;
  p50Ms: number;
  p95Ms: number;
  byClass: Record<string, number>;
  fiveXx: number;
  disconnects: number;
  /** A few 5xx answers (kind, status, body head) for the report. */
  fiveXxSamples: string[];
}

function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)]!;
}

function sentence(rand: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(pick(rand, WORDS));
  return out.join(' ');
}

/** A system prompt from a small pool (shared prefixes hit the tier) and a user turn that varies. */
function conversation(rand: () => number): { system: string; user: string } {
  const system = `You are soak assistant number ${Math.floor(rand() * 4)}. ${sentence(seededRandom(7), 40)}`;
  return { system, user: sentence(rand, 3 + Math.floor(rand() * 30)) };
}

function plan(rand: () => number, model: string): Planned {
  const auth = { authorization: `Bearer ${SOAK_KEY}`, 'content-type': 'application/json' };
  const maxTokens = 4 + Math.floor(rand() * 24);
  const { system, user } = conversation(rand);
  const stream = rand() < 0.5;
  const disconnect = stream && rand() < 0.25;
  const r = rand();
  if (r < 0.22) {
    return { kind: 'chat', path: '/v1/chat/completions', method: 'POST', headers: auth, stream, disconnect, body: JSON.stringify({ model, stream, max_tokens: maxTokens, temperature: rand() < 0.5 ? 0 : 0.8, messages: [{ role: 'system', content: system }, { role: 'user', content: user }] }) };
  }
  if (r < 0.36) {
    return { kind: 'completions', path: '/v1/completions', method: 'POST', headers: auth, stream, disconnect, body: JSON.stringify({ model, stream, max_tokens: maxTokens, prompt: `${system}\n${user}` }) };
  }
  if (r < 0.52) {
    return { kind: 'messages', path: '/v1/messages', method: 'POST', headers: { ...auth, 'anthropic-version': '2023-06-01' }, stream, disconnect, body: JSON.stringify({ model, stream, max_tokens: maxTokens, system, messages: [{ role: 'user', content: user }] }) };
  }
  if (r < 0.66) {
    return { kind: 'responses', path: '/v1/responses', method: 'POST', headers: auth, stream, disconnect, body: JSON.stringify({ model, stream, max_output_tokens: 16 + maxTokens, instructions: system, input: user }) };
  }
  if (r < 0.7) return { kind: 'models', path: '/v1/models', method: 'GET', headers: auth, stream: false, disconnect: false };
  // Invalid traffic: each must be a 4xx, never a 5xx.
  const bad = pick(rand, ['no-key', 'broken-json', 'wrong-type', 'absurd-numbers', 'unknown-role', 'unknown-route', 'empty-messages', 'huge-stop'] as const);
  switch (bad) {
    case 'no-key':
      return { kind: 'bad:no-key', path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' }, stream: false, disconnect: false, body: JSON.stringify({ messages: [{ role: 'user', content: user }] }) };
    case 'broken-json':
      return { kind: 'bad:broken-json', path: pick(rand, ['/v1/chat/completions', '/v1/messages', '/v1/responses', '/v1/completions']), method: 'POST', headers: auth, stream: false, disconnect: false, body: `{"messages": [{"role": "user", "content": "${user}"` };
    case 'wrong-type':
      return { kind: 'bad:wrong-type', path: '/v1/chat/completions', method: 'POST', headers: auth, stream: false, disconnect: false, body: JSON.stringify({ messages: 'not a list', max_tokens: 'many' }) };
    case 'absurd-numbers':
      return { kind: 'bad:absurd-numbers', path: '/v1/chat/completions', method: 'POST', headers: auth, stream: false, disconnect: false, body: JSON.stringify({ messages: [{ role: 'user', content: user }], max_tokens: 1e12, temperature: -5, top_p: 9, n: 1000 }) };
    case 'unknown-role':
      return { kind: 'bad:unknown-role', path: '/v1/chat/completions', method: 'POST', headers: auth, stream: false, disconnect: false, body: JSON.stringify({ messages: [{ role: 'wizard', content: user }] }) };
    case 'unknown-route':
      return { kind: 'bad:unknown-route', path: '/v1/nothing-here', method: 'POST', headers: auth, stream: false, disconnect: false, body: '{}' };
    case 'empty-messages':
      return { kind: 'bad:empty-messages', path: '/v1/messages', method: 'POST', headers: auth, stream: false, disconnect: false, body: JSON.stringify({ model, max_tokens: 8, messages: [] }) };
    case 'huge-stop':
      return { kind: 'bad:huge-stop', path: '/v1/chat/completions', method: 'POST', headers: auth, stream: false, disconnect: false, body: JSON.stringify({ messages: [{ role: 'user', content: user }], stop: Array.from({ length: 50 }, () => 'x'.repeat(5000)) }) };
  }
}

interface Outcome {
  kind: string;
  status: number;
  ms: number;
  disconnected: boolean;
  detail?: string;
}

async function send(url: string, p: Planned): Promise<Outcome> {
  const started = performance.now();
  const controller = new AbortController();
  try {
    const response = await fetch(url + p.path, { method: p.method, headers: p.headers, body: p.body, signal: controller.signal });
    if (p.disconnect && response.status === 200 && response.body) {
      const reader = response.body.getReader();
      await reader.read();
      controller.abort();
      return { kind: p.kind, status: response.status, ms: performance.now() - started, disconnected: true };
    }
    const text = await response.text();
    // A stream that breaks off with an error event after its 200 counts as a server error too.
    const streamedError = response.status === 200 && p.stream && /"type":\s*"(server_error|api_error|internal_error)"|KVT_ERR_INTERNAL/.test(text);
    const status = streamedError ? 599 : response.status;
    return { kind: p.kind, status, ms: performance.now() - started, disconnected: false, detail: status >= 500 ? text.slice(0, 300) : undefined };
  } catch (error) {
    // A refused or reset connection is the server failing the client: count it as a 5xx.
    return { kind: p.kind, status: 598, ms: performance.now() - started, disconnected: false, detail: String(error) };
  }
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export interface SoakRun {
  windows: WindowStats[];
  totalRequests: number;
  totalFiveXx: number;
}

/**
 * Drives `concurrency` clients for `durationMs`, calling `onWindow` every
 * `windowMs` with that window's figures. Latency is the time to the full
 * answer (to the first chunk for a client that hangs up).
 */
export async function runSoakTraffic(options: { url: string; model: string; durationMs: number; windowMs: number; concurrency: number; seed: number; onWindow?: (w: WindowStats) => void }): Promise<SoakRun> {
  const rand = seededRandom(options.seed);
  const end = Date.now() + options.durationMs;
  const windows: WindowStats[] = [];
  let current: Outcome[] = [];
  const flush = () => {
    const outcomes = current;
    current = [];
    const latencies = outcomes.filter((o) => !o.kind.startsWith('bad:')).map((o) => o.ms).sort((a, b) => a - b);
    const byClass: Record<string, number> = {};
    for (const o of outcomes) {
      const cls = `${Math.floor(o.status / 100)}xx`;
      byClass[cls] = (byClass[cls] ?? 0) + 1;
    }
    const fiveXx = outcomes.filter((o) => o.status >= 500);
    const w: WindowStats = {
      window: windows.length,
      requests: outcomes.length,
      p50Ms: Math.round(quantile(latencies, 0.5)),
      p95Ms: Math.round(quantile(latencies, 0.95)),
      byClass,
      fiveXx: fiveXx.length,
      disconnects: outcomes.filter((o) => o.disconnected).length,
      fiveXxSamples: fiveXx.slice(0, 3).map((o) => `${o.kind} ${o.status} ${o.detail ?? ''}`),
    };
    windows.push(w);
    options.onWindow?.(w);
  };
  const timer = setInterval(flush, options.windowMs);
  const client = async () => {
    while (Date.now() < end) current.push(await send(options.url, plan(rand, options.model)));
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, client));
  } finally {
    clearInterval(timer);
  }
  if (current.length > 0) flush();
  return { windows, totalRequests: windows.reduce((s, w) => s + w.requests, 0), totalFiveXx: windows.reduce((s, w) => s + w.fiveXx, 0) };
}
