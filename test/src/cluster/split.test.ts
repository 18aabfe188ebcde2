/**
 * Prefill/decode split as processes: `kvtier serve` with REDIS_URL, one
 * `kvtier worker` with KVTIER_ROLE=prefill and one with KVTIER_ROLE=decode on
 * one shared fs block dir, a real redis-server. Every request runs as a
 * prefill half (prompt blocks written through to storage) then a decode half
 * (loads them, computes only the partial last block, generates); replies are
 * compared with an embedded (colocated) `kvtier serve` on the same prompts.
 *
 * What each half did is read from BullMQ's completed events (the worker
 * returns its role, completion and prefill token counts).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { QUEUE_NAME, roleQueueName } from '../../../src/workers/index.ts';
import { freePort, RedisProcess } from '../workers/processes.ts';
import { chat, sessionSystem, startServe, stopProcesses, userTurn, type ChatMessage, type ServeProcess } from './cluster-processes.ts';
import { SplitJobs, type Half } from './split-jobs.ts';

const BLOCK = 64;
const REPLY_TOKENS = 12;

let embedded: ServeProcess;
let redis: RedisProcess;
let api: ServeProcess;
let conditionalApi: ServeProcess;
const CONDITIONAL_MIN_TOKENS = 2 * BLOCK;
const jobs = new SplitJobs(() => redis.url, 'kvtier-split-');

/** The `count` jobs of the request just made: the completed jobs that were not there before. */
async function jobsSince(before: Set<string>, count: number): Promise<Half[]> {
  const fresh = await jobs.since(before, 'jobs', (f) => (f.length >= count ? f : undefined));
  expect(fresh.map((h) => h.jobId)).toHaveLength(count);
  return fresh;
}

/** The two halves of the request just made. */
async function halvesOf(before: Set<string>): Promise<{ prefill: Half; decode: Half }> {
  const fresh = await jobsSince(before, 2);
  const prefill = fresh.find((h) => h.jobId.endsWith('-p'));
  const decode = fresh.find((h) => h.jobId.endsWith('-d'));
  expect(prefill, `a prefill half among ${fresh.map((h) => h.jobId)}`).toBeDefined();
  expect(decode, `a decode half among ${fresh.map((h) => h.jobId)}`).toBeDefined();
  return { prefill: prefill!, decode: decode! };
}

beforeAll(async () => {
  // The processes start together: the file's wall time is mostly these starts.
  const startEmbedded = startServe({});
  redis = new RedisProcess(await freePort());
  await redis.start();
  const blocksDir = mkdtempSync(join(tmpdir(), 'kvtier-split-blocks-'));
  for (const name of [QUEUE_NAME, roleQueueName('prefill'), roleQueueName('decode')]) await jobs.listen(name);
  const apiEnv = { REDIS_URL: redis.url, KVTIER_STORAGE: `fs:${blocksDir}`, KVTIER_REQUEST_TIMEOUT_MS: '120000', KVTIER_QUEUE_WAIT_TIMEOUT_MS: '60000' };
  [embedded, api, conditionalApi] = await Promise.all([
    startEmbedded,
    // Every request as two halves, however few tokens are new.
    startServe({ ...apiEnv, KVTIER_SPLIT_MIN_PREFILL_TOKENS: '0' }),
    startServe({ ...apiEnv, KVTIER_SPLIT_MIN_PREFILL_TOKENS: String(CONDITIONAL_MIN_TOKENS) }),
    jobs.addWorker('prefill', blocksDir, 'synthetic:tiny'),
    jobs.addWorker('decode', blocksDir, 'synthetic:tiny'),
  ]);
}, 240_000);

afterAll(async () => {
  await stopProcesses([api, conditionalApi, embedded], jobs.workers);
  await jobs.close();
  await redis?.stop();
});

describe('prefill/decode split (1 prefill + 1 decode worker)', () => {
  it('replies equal the colocated run; the decode worker computes less than a block per request; usage shows the hits before the request', async () => {
    const sessions: ChatMessage[][] = [0, 1].map((s) => [{ role: 'system', content: sessionSystem(400 + s) }]);
    const reference: ChatMessage[][] = sessions.map((t) => t.slice());
    const singles: ChatMessage[][] = [
      [{ role: 'user', content: 'A short prompt of less than one block.' }],
      [
        { role: 'system', content: 'Exactly-ish two blocks of system prompt. '.repeat(14) },
        { role: 'user', content: 'Go.' },
      ],
    ];
    const lastPrompt: number[] = [];
    let checked = 0;
    const run = async (messages: ChatMessage[], expectedMessages: ChatMessage[], previousPrompt: number | null) => {
      const before = new Set(jobs.halves.keys());
      const got = await chat(api.url, messages, REPLY_TOKENS, 1);
      const expected = await chat(embedded.url, expectedMessages, REPLY_TOKENS, 1);
      expect(got.content).toBe(expected.content);
      expect(got.finishReason).toBe(expected.finishReason);
      expect(got.promptTokens).toBe(expected.promptTokens);
      const { prefill, decode } = await halvesOf(before);
      expect(prefill.role).toBe('prefill');
      expect(prefill.completionTokens).toBe(0);
      expect(decode.role).toBe('decode');
      // The decode worker loaded every full prompt block the prefill worker stored: it computed only
      // the partial last block (and, at most, one token more at the end of the reply).
      expect(decode.prefillTokens, `decode half of a ${got.promptTokens}-token prompt`).toBeLessThan(BLOCK + 1);
      // The client's usage is the prefill half's: the hits before this request.
      if (previousPrompt === null) expect(got.cachedTokens).toBe(0);
      else expect(got.cachedTokens).toBeGreaterThanOrEqual(Math.floor(previousPrompt / BLOCK) * BLOCK);
      checked++;
      return got;
    };
    for (const messages of singles) await run(messages, messages, null);
    for (let turn = 0; turn < 3; turn++) {
      for (let s = 0; s < sessions.length; s++) {
        sessions[s].push({ role: 'user', content: userTurn(400 + s, turn) });
        reference[s].push({ role: 'user', content: userTurn(400 + s, turn) });
        const previous = turn === 0 ? null : lastPrompt[s];
        const got = await run(sessions[s], reference[s], previous);
        lastPrompt[s] = got.promptTokens;
        sessions[s].push({ role: 'assistant', content: got.content });
        reference[s].push({ role: 'assistant', content: got.content });
      }
    }
    expect(checked).toBe(singles.length + 6);
  }, 300_000);

  it(`KVTIER_SPLIT_MIN_PREFILL_TOKENS=${CONDITIONAL_MIN_TOKENS}: a cold prompt splits, a cached turn adding fewer new tokens runs whole on the decode worker; replies equal colocated`, async () => {
    const transcript: ChatMessage[] = [{ role: 'system', content: sessionSystem(500) }];
    let previousPrompt = 0;
    for (let turn = 0; turn < 3; turn++) {
      transcript.push({ role: 'user', content: turn === 0 ? userTurn(500, 0) : `Next ${turn}?` });
      const before = new Set(jobs.halves.keys());
      const got = await chat(conditionalApi.url, transcript, REPLY_TOKENS, 1);
      const expected = await chat(embedded.url, transcript, REPLY_TOKENS, 1);
      expect(got.content).toBe(expected.content);
      if (turn === 0) {
        expect(got.promptTokens).toBeGreaterThanOrEqual(CONDITIONAL_MIN_TOKENS);
        const { decode } = await halvesOf(before);
        expect(decode.prefillTokens).toBeLessThan(BLOCK + 1);
      } else {
        const [only] = await jobsSince(before, 1);
        expect(only.jobId.endsWith('-d'), only.jobId).toBe(true);
        expect(only.role).toBe('decode');
        // It prefilled only what no worker held: less than the threshold.
        expect(only.prefillTokens).toBeLessThan(CONDITIONAL_MIN_TOKENS);
        expect(got.cachedTokens).toBeGreaterThanOrEqual(Math.floor(previousPrompt / BLOCK) * BLOCK);
      }
      previousPrompt = got.promptTokens;
      transcript.push({ role: 'assistant', content: got.content });
    }
  }, 300_000);
});
