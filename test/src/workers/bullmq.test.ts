/**
 * Distributed mode for real: a redis-server, `kvtier worker` processes with
 * their own data dirs and one shared fs block dir, and the API with the
 * BullMQ runner. Workers are killed, Redis is stopped and started again.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Redis } from 'ioredis';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from '../serve/server-fixture.ts';
import { freePort, RedisProcess, startWorker, type WorkerProcess } from './processes.ts';

let redis: RedisProcess;
let server: TestServer;
let client: OpenAI;
let sharedStorage: string;
const workers: WorkerProcess[] = [];

const SYSTEM = 'You are a distributed cache test. '.repeat(20);

function workerEnv(name: string): Record<string, string> {
  return {
    REDIS_URL: redis.url,
    KVTIER_MODEL: 'synthetic:tiny',
    KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), `kvtier-worker-${name}-`)),
    KVTIER_STORAGE: `fs:${sharedStorage}`,
  };
}

async function spawnWorker(name: string): Promise<WorkerProcess> {
  const worker = await startWorker(workerEnv(name));
  workers.push(worker);
  return worker;
}

beforeAll(async () => {
  redis = new RedisProcess(await freePort());
  await redis.start();
  sharedStorage = mkdtempSync(join(tmpdir(), 'kvtier-shared-blocks-'));
  server = await startTestServer({ redisUrl: redis.url, storage: `fs:${sharedStorage}`, requestTimeoutMs: 60_000, queueWaitTimeoutMs: 30_000 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await redis?.stop();
});

const ask = (content: string, maxTokens = 8, temperature = 0, seed = 11) =>
  client.chat.completions.create({ model: 'synthetic:tiny', messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content }], max_tokens: maxTokens, temperature, seed });

describe('BullMQ workers', () => {
  it('a prefix computed by one worker is a hit on another', async () => {
    const first = await spawnWorker('a');
    const cold = await ask('Which worker am I on?');
    expect(cold.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
    // Let the first worker's write-behind finish, then hand over to a second worker with an empty index.
    await first.stop('SIGTERM');
    const second = await spawnWorker('b');
    const warm = await ask('Which worker am I on?');
    expect(warm.usage!.prompt_tokens_details!.cached_tokens).toBe(Math.floor((cold.usage!.prompt_tokens - 1) / 64) * 64);
    expect(warm.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(0);
    expect(warm.choices[0].message.content).toBe(cold.choices[0].message.content);
    expect(second.child.exitCode).toBeNull();
  });

  it("the worker writes the reply's reply-memory record ahead of its done: one SET, on the connection that then publishes the done", async () => {
    if (!workers.some((w) => w.child.exitCode === null)) await spawnWorker('c');
    const watcher = new Redis(redis.url);
    const monitor = await watcher.monitor();
    const seen: Array<{ command: string; key: string; source: string; done: boolean }> = [];
    const heardDone = new Promise<void>((resolve) => {
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        const command = args[0].toLowerCase();
        if (command === 'set' && args[1].startsWith('kvtier:reply:')) seen.push({ command, key: args[1], source, done: false });
        if (command === 'publish' && args[1].startsWith('kvtier:events:') && args[2].includes('"type":"done"')) {
          seen.push({ command, key: args[1], source, done: true });
          resolve();
        }
      });
    });
    try {
      const reply = await ask('Write my reply memory, please.');
      expect(reply.choices[0].message.content).not.toBe('');
      await heardDone;
      const sets = seen.filter((c) => c.command === 'set');
      const done = seen.findIndex((c) => c.done);
      expect(sets).toHaveLength(1);
      expect(seen.indexOf(sets[0])).toBeLessThan(done);
      expect(sets[0].source).toBe(seen[done].source);
    } finally {
      monitor.disconnect();
      watcher.disconnect();
    }
  });

  it('POST /admin/gc answers with the run\'s report every time, also when the job finishes before the API starts waiting', async () => {
    // An empty GC finishes in a few ms, often before waitUntilFinished first polls the job; a job
    // already removed on completion read as "missing" there and the API answered 500.
    for (let i = 0; i < 25; i++) {
      const response = await fetch(`${server.url}/admin/gc`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: '{}' });
      const body = await response.text();
      expect(response.status, `run ${i}: ${body}`).toBe(200);
      expect(JSON.parse(body)).toMatchObject({ dryRun: false });
    }
  });

  it('a worker SIGKILLed mid-stream: the job moves to another worker and the stream completes, unchanged', async () => {
    // A reply that runs to max_tokens (no early end-of-turn), as the reference. Seeded sampling is
    // deterministic, so the re-run on the next worker must give exactly these tokens.
    // Candidates vary the seed too: with one seed every prompt draws the same uniforms.
    let question = '';
    let seed = 11;
    let reference: OpenAI.Chat.Completions.ChatCompletion | null = null;
    for (let i = 0; i < 24 && !reference; i++) {
      const candidate = await ask(`Long answer please, variant ${i}.`, 300, 1, 11 + i);
      if (candidate.choices[0].finish_reason === 'length') {
        question = `Long answer please, variant ${i}.`;
        reference = candidate;
        seed = 11 + i;
      }
    }
    expect(reference, 'no prompt generated 300 tokens without stopping').not.toBeNull();
    const victim = workers.find((w) => w.child.exitCode === null)!;
    const stream = await client.chat.completions.create({
      model: 'synthetic:tiny',
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: question }],
      max_tokens: 300,
      temperature: 1,
      seed,
      stream: true,
    });
    let text = '';
    let killed = false;
    let replacement: Promise<WorkerProcess> | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (!killed && text.length > 0) {
        killed = true;
        await victim.stop('SIGKILL');
        replacement = spawnWorker('c');
      }
    }
    await replacement;
    expect(killed).toBe(true);
    expect(text).toBe(reference!.choices[0].message.content);
  });

  it('Redis down → clear 503 at once; back up → serving again by itself', async () => {
    await redis.stop();
    const started = Date.now();
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}` },
      body: JSON.stringify({ model: 'synthetic:tiny', messages: [{ role: 'user', content: 'anyone?' }], max_tokens: 2 }),
    });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).not.toBeNull();
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('KVT_ERR_QUEUE_UNAVAILABLE');
    expect(Date.now() - started).toBeLessThan(5000);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(503);

    await redis.start();
    const deadline = Date.now() + 30_000;
    while ((await fetch(`${server.url}/readyz`)).status !== 200) {
      if (Date.now() > deadline) throw new Error('the API did not become ready after Redis came back');
      await new Promise((r) => setTimeout(r, 200));
    }
    const again = await ask('Back again?', 4);
    expect(again.choices[0].message.content).toBeDefined();
  });
});
