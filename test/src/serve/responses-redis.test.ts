/**
 * Stored responses in a cluster (REDIS_URL): two API processes and one
 * `kvtier worker` on one Redis. A response created through one API process is
 * read, continued (previous_response_id) and deleted through the other; the
 * record stays its tenant's. A background run in one is cancelled or deleted
 * through the other (the store carries the mark its process polls for).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { freePort, RedisProcess, startWorker, type WorkerProcess } from '../workers/processes.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const MODEL = 'synthetic:tiny';
const INSTRUCTIONS = 'You are a distributed cache test. '.repeat(20);

let redis: RedisProcess;
let worker: WorkerProcess;
let first: TestServer;
let second: TestServer;

beforeAll(async () => {
  redis = new RedisProcess(await freePort());
  await redis.start();
  const storage = mkdtempSync(join(tmpdir(), 'kvtier-responses-blocks-'));
  worker = await startWorker({ REDIS_URL: redis.url, KVTIER_MODEL: MODEL, KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), 'kvtier-worker-responses-')), KVTIER_STORAGE: `fs:${storage}` });
  // One data dir: API processes that share a cache share the server secret (tenant salts).
  const options = { redisUrl: redis.url, storage: `fs:${storage}`, requestTimeoutMs: 60_000, queueWaitTimeoutMs: 30_000, dataDir: mkdtempSync(join(tmpdir(), 'kvtier-responses-api-')) };
  first = await startTestServer(options);
  second = await startTestServer(options);
}, 120_000);

afterAll(async () => {
  await first?.close();
  await second?.close();
  await worker?.stop('SIGKILL');
  await redis?.stop();
});

describe('/v1/responses with REDIS_URL', () => {
  it('one API process stores, the other reads, continues and deletes; another tenant sees nothing', async () => {
    const one = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
    const two = new OpenAI({ baseURL: `${second.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
    const bob = new OpenAI({ baseURL: `${second.url}/v1`, apiKey: KEYS.bob, maxRetries: 0 });
    const created = await one.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'Turn 1', max_output_tokens: 8, temperature: 0 });
    expect((await two.responses.retrieve(created.id)).output_text).toBe(created.output_text);
    await expect(bob.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    // Continued on the other process, chained three times back and forth: each turn's cache covers the whole
    // previous turn (its reply's sampled ids travel with the stored response, not a re-encoding of its text).
    let previous = created;
    for (const [turn, client] of [[2, two], [3, one], [4, two]] as const) {
      const next = await client.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: `Turn ${turn}`, previous_response_id: previous.id, max_output_tokens: 8, temperature: 1 });
      expect(next.usage!.input_tokens).toBeGreaterThan(previous.usage!.input_tokens + previous.usage!.output_tokens);
      expect(next.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(Math.floor((previous.usage!.input_tokens + previous.usage!.output_tokens - 1) / 64) * 64);
      previous = next;
    }
    const next = previous;
    await two.responses.delete(created.id);
    await expect(one.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    expect((await one.responses.retrieve(next.id)).id).toBe(next.id);
  }, 120_000);

  it('a background run is cancelled, and another deleted, through the API process that does not run it', async () => {
    const one = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
    const two = new OpenAI({ baseURL: `${second.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
    // A grammar holds the reply open for ≥ 1500 characters, so the run is still going when the other process acts.
    const talk = { type: 'object', properties: { talk: { type: 'string', minLength: 1500 } }, required: ['talk'], additionalProperties: false };
    const longRun = () =>
      one.responses.create({ model: MODEL, input: 'Talk for a long time', text: { format: { type: 'json_schema', name: 'talk', schema: talk, strict: true } }, max_output_tokens: 1900, temperature: 0, background: true });
    const inProgress = async (id: string) => {
      while ((await two.responses.retrieve(id)).status !== 'in_progress') await new Promise((resolve) => setTimeout(resolve, 20));
    };
    const cancelMe = await longRun();
    await inProgress(cancelMe.id);
    expect((await two.responses.cancel(cancelMe.id)).status).toBe('cancelled');
    expect((await one.responses.retrieve(cancelMe.id)).status).toBe('cancelled');

    const deleteMe = await longRun();
    await inProgress(deleteMe.id);
    await two.responses.delete(deleteMe.id);
    // The process running it stops it and does not write the record back. Its event stream, held there after the run,
    // ends when the run has finished (its record settled, or left unwritten): read to its end, nothing is pending.
    const replay = await fetch(`${first.url}/v1/responses/${deleteMe.id}?stream=true`, { headers: { authorization: `Bearer ${KEYS.alice}` } });
    expect(replay.status).toBe(200);
    expect(await replay.text()).toContain('event: response.cancelled');
    expect(first.built.context.runner.status()).toMatchObject({ running: 0, waiting: 0 });
    await expect(one.responses.retrieve(deleteMe.id)).rejects.toMatchObject({ status: 404 });
    await expect(two.responses.retrieve(deleteMe.id)).rejects.toMatchObject({ status: 404 });
  }, 120_000);
});
