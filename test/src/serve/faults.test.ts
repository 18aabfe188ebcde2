/**
 * Faults on the embedded default: storage that stops accepting writes, a
 * full queue, concurrent requests sharing an uncached prefix, a client that
 * goes away mid-stream.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, readdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';

import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';

let server: TestServer | null = null;

afterEach(async () => {
  await server?.close();
  server = null;
});

const SYSTEM = 'Fault injection keeps answers correct. '.repeat(16);
const client = (key: string = KEYS.alice) => new OpenAI({ baseURL: `${server!.url}/v1`, apiKey: key, maxRetries: 0 });
const ask = (key: string, content: string, extra: Partial<OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming> = {}, options: OpenAI.RequestOptions = {}) =>
  client(key).chat.completions.create({ model: 'synthetic:tiny', messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content }], max_tokens: 12, temperature: 0, ...extra }, options);

async function tierErrors(): Promise<Record<string, number>> {
  const response = await fetch(`${server!.url}/admin/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const body = (await response.json()) as { tier: { cache: { errors: Record<string, number> } } };
  return body.tier.cache.errors;
}

/** The fs store's block files (blocks/<2>/<2>/<32 hex>). */
function blockFiles(dataDir: string): string[] {
  const blocksDir = join(dataDir, 'blocks');
  return readdirSync(blocksDir, { recursive: true, encoding: 'utf8' })
    .filter((name) => /^[0-9a-f]{32}$/.test(basename(name)))
    .map((name) => join(blocksDir, name));
}

/** The runner's waiting + running jobs, once `done` holds for it (polled). */
async function runnerOccupancy(done: (n: number) => boolean): Promise<number> {
  let occupancy = -1;
  for (let poll = 0; poll < 400 && !done(occupancy); poll++) {
    if (poll > 0) await new Promise((r) => setTimeout(r, 25));
    const response = await fetch(`${server!.url}/admin/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const { runner } = (await response.json()) as { runner: { waiting: number; running: number } };
    occupancy = runner.waiting + runner.running;
  }
  return occupancy;
}

/** Opens the FIFO's writing end once a reader has it open (ENXIO before: polled). */
async function openWhenRead(fifo: string): Promise<number> {
  for (let poll = 0; poll < 400; poll++) {
    try {
      return openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENXIO') throw error;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no reader opened ${fifo}`);
}

describe('faults', () => {
  it('storage that cannot be written: answers stay correct, errors are counted', async () => {
    server = await startTestServer();
    // The reference writes nothing: a block write still in flight at the rename would re-create the
    // directory (mkdir -p) and turn the file below into EISDIR (a flake seen under load).
    const reference = await ask(KEYS.alice, 'Storage will break soon.', {}, { headers: { 'x-kvtier-cache': 'no-store' } });
    expect(readdirSync(join(server.dataDir, 'blocks')), 'a no-store request leaves no block').toEqual([]);
    // The block directory becomes a plain file: every write under it fails (even for root, unlike chmod).
    const blocksDir = join(server.dataDir, 'blocks');
    renameSync(blocksDir, `${blocksDir}.gone`);
    writeFileSync(blocksDir, 'not a directory');
    const afterFault = await ask(KEYS.bob, 'Storage will break soon.');
    expect(afterFault.choices[0].message.content).toBe(reference.choices[0].message.content);
    expect(afterFault.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
    const fresh = await ask(KEYS.bob, 'A brand new question after the fault.');
    expect(fresh.choices[0].message.content).toBeDefined();
    const deadline = Date.now() + 10_000;
    let errors = await tierErrors();
    while (!Object.keys(errors).some((code) => code.startsWith('KVT_ERR_STORAGE_')) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      errors = await tierErrors();
    }
    expect(Object.keys(errors).some((code) => code.startsWith('KVT_ERR_STORAGE_'))).toBe(true);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });

  it('a full queue answers 429 with Retry-After, and serving goes on', async () => {
    const content = 'A full queue turns the next request away while this prompt waits on its stored prefix, a whole block of it.';
    // A first server stores the prompt's one block (its close waits for the write).
    server = await startTestServer();
    const { dataDir } = server;
    const first = await client().chat.completions.create({ model: 'synthetic:tiny', messages: [{ role: 'user', content }], max_tokens: 2, temperature: 0 });
    expect(Math.floor((first.usage!.prompt_tokens - 1) / 64), 'the prompt holds exactly one whole block').toBe(1);
    await server.close();
    const stored = blockFiles(dataDir);
    expect(stored, 'one block stored').toHaveLength(1);
    const [blockFile] = stored;
    // The test server on the same data: nothing in memory (no retained sequence, no hot cache, no write in flight),
    // so a request hitting that block reads its file.
    server = await startTestServer({ dataDir, maxBatch: 1, maxQueueDepth: 0, retainSequences: 0, hotCacheBytes: 0 });
    // Storage that hangs: the block's file becomes a FIFO, whose open waits for a writer. The request hitting it
    // waits in its load, counted in the queue, until the test opens the other end: no race with a reply that ends.
    unlinkSync(blockFile);
    execFileSync('mkfifo', [blockFile]);
    const held = client().chat.completions.create({ model: 'synthetic:tiny', messages: [{ role: 'user', content }], max_tokens: 2, temperature: 0 });
    let opened = false;
    try {
      expect(await runnerOccupancy((n) => n === 1), 'the held request is waiting or running').toBe(1);
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}` },
        body: JSON.stringify({ model: 'synthetic:tiny', messages: [{ role: 'user', content: 'me too' }], max_tokens: 2 }),
      });
      expect(response.status).toBe(429);
      expect(response.headers.get('retry-after')).toBe('1');
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('KVT_ERR_QUEUE_FULL');
      // The other end opened and closed: the load reads no bytes (a damaged block, recomputed), and the request completes.
      closeSync(await openWhenRead(blockFile));
      opened = true;
    } finally {
      // A failed check above must not leave the load hanging (the server's close would wait on it): O_RDWR opens without a reader.
      if (!opened) closeSync(openSync(blockFile, constants.O_RDWR));
    }
    const released = await held;
    expect(released.choices[0].message.content).toBe(first.choices[0].message.content);
    expect(await runnerOccupancy((n) => n === 0)).toBe(0);
    const after = await ask(KEYS.alice, 'Now there is room.', { max_tokens: 2 });
    expect(after.choices).toHaveLength(1);
  });

  it('single flight: concurrent requests sharing an uncached prefix compute it once', async () => {
    server = await startTestServer();
    const [a, b] = await Promise.all([ask(KEYS.alice, 'Same new prefix for both.'), ask(KEYS.alice, 'Same new prefix for both.')]);
    const whole = Math.floor((a.usage!.prompt_tokens - 1) / 64) * 64;
    expect(whole).toBeGreaterThan(0);
    const cached = [a.usage!.prompt_tokens_details!.cached_tokens, b.usage!.prompt_tokens_details!.cached_tokens].sort((x, y) => x! - y!);
    expect(cached).toEqual([0, whole]);
    expect(a.choices[0].message.content).toBe(b.choices[0].message.content);
  });

  it('requests wait for room in the KV pool instead of failing', async () => {
    // 1 MiB of tiny-model KV = 16 blocks = 1024 tokens: two of these sequences do not fit at once.
    server = await startTestServer({ poolBytes: 1024 * 1024 });
    const replies = await Promise.all([0, 1, 2].map((i) => ask(i === 1 ? KEYS.bob : KEYS.alice, `Pool pressure ${i}.`, { max_tokens: 400, temperature: 1, seed: i })));
    for (const reply of replies) expect(reply.choices[0].finish_reason).toMatch(/stop|length/);
  });

  it('a client that goes away mid-stream does not stop the server', async () => {
    server = await startTestServer();
    const controller = new AbortController();
    const stream = await client().chat.completions.create(
      { model: 'synthetic:tiny', messages: [{ role: 'user', content: 'I will hang up.' }], max_tokens: 300, temperature: 1, seed: 5, stream: true },
      { signal: controller.signal },
    );
    let chunks = 0;
    try {
      for await (const _chunk of stream) {
        chunks++;
        controller.abort();
      }
    } catch (error) {
      expect((error as Error).name).toMatch(/Abort/);
    }
    expect(chunks).toBeGreaterThan(0);
    const after = await ask(KEYS.alice, 'Still serving?', { max_tokens: 2 });
    expect(after.choices).toHaveLength(1);
  });
});
