/**
 * Prefill/decode split on gemma3 served with prefix units (issue #26), as
 * processes: `kvtier serve` with REDIS_URL, one `kvtier worker` with
 * KVTIER_ROLE=prefill and one with KVTIER_ROLE=decode on one shared fs block
 * dir and a real redis-server (the metadata plane). Every request runs as a
 * prefill half — it stops at the prompt's last token but one and writes the
 * unit there: the global layer's blocks and the sliding windows' tail — and a
 * decode half on the other worker, which finds that unit through the plane,
 * loads it from the shared storage and computes exactly one prompt token.
 * Replies equal an embedded (colocated) `kvtier serve` of the same model.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ensureGemma3Model } from '../../../inference-core/synthetic/gemma3-synthetic.ts';
import type { OverviewResponse } from '../../../src/admin/index.ts';
import { roleQueueName } from '../../../src/workers/index.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';
import { freePort, RedisProcess } from '../workers/processes.ts';
import { ADMIN_TOKEN, chat, sessionSystem, startServe, stopProcesses, userTurn, type ChatMessage, type ServeProcess } from './cluster-processes.ts';
import { SplitJobs, type Half } from './split-jobs.ts';

const REPLY_TOKENS = 8;

let model: string;
let embedded: ServeProcess;
let redis: RedisProcess;
let api: ServeProcess;
const jobs = new SplitJobs(() => redis.url, 'kvtier-split-units-');

/** The two halves of the request just made (its completed jobs that were not there before). */
function halvesOf(before: Set<string>): Promise<{ prefill: Half; decode: Half }> {
  return jobs.since(before, 'halves', (fresh) => {
    const prefill = fresh.find((h) => h.jobId.endsWith('-p'));
    const decode = fresh.find((h) => h.jobId.endsWith('-d'));
    return prefill && decode ? { prefill, decode } : undefined;
  });
}

beforeAll(async () => {
  model = ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR });
  const startEmbedded = startServe({ KVTIER_MODEL: model });
  redis = new RedisProcess(await freePort());
  await redis.start();
  const blocksDir = mkdtempSync(join(tmpdir(), 'kvtier-split-units-blocks-'));
  for (const role of ['prefill', 'decode'] as const) await jobs.listen(roleQueueName(role));
  [embedded, api] = await Promise.all([
    startEmbedded,
    // Every request as two halves, however few tokens are new.
    startServe({ REDIS_URL: redis.url, KVTIER_STORAGE: `fs:${blocksDir}`, KVTIER_MODEL: model, KVTIER_SPLIT_MIN_PREFILL_TOKENS: '0', KVTIER_REQUEST_TIMEOUT_MS: '120000', KVTIER_QUEUE_WAIT_TIMEOUT_MS: '60000' }),
    jobs.addWorker('prefill', blocksDir, model),
    jobs.addWorker('decode', blocksDir, model),
  ]);
}, 300_000);

afterAll(async () => {
  await stopProcesses([api, embedded], jobs.workers);
  await jobs.close();
  await redis?.stop();
});

describe('prefill/decode split with prefix units (gemma3: global-layer blocks + window tails)', () => {
  it('the decode worker continues from the unit the prefill worker wrote (one prompt token computed); replies equal the colocated run', async () => {
    const transcript: ChatMessage[] = [{ role: 'system', content: sessionSystem(600) }];
    let previousPrompt: number | null = null;
    for (let turn = 0; turn < 3; turn++) {
      transcript.push({ role: 'user', content: userTurn(600, turn) });
      const before = new Set(jobs.halves.keys());
      const served = basename(model, '.gguf');
      const got = await chat(api.url, transcript, REPLY_TOKENS, 0, 7, served);
      const expected = await chat(embedded.url, transcript, REPLY_TOKENS, 0, 7, served);
      expect(got.content).toBe(expected.content);
      expect(got.promptTokens).toBe(expected.promptTokens);
      const { prefill, decode } = await halvesOf(before);
      expect(prefill.role).toBe('prefill');
      expect(decode.role).toBe('decode');
      expect(prefill.workerId).not.toBe(decode.workerId);
      // the unit at the prompt's last token but one, written by the other process, read from shared storage
      expect(decode.prefillTokens, `decode half of a ${got.promptTokens}-token prompt`).toBe(1);
      // the client's usage is the prefill half's: a later turn hits the unit of the turn before (its prompt but one token, at least)
      if (previousPrompt === null) expect(got.cachedTokens).toBe(0);
      else expect(got.cachedTokens).toBeGreaterThanOrEqual(previousPrompt - 1);
      previousPrompt = got.promptTokens;
      transcript.push({ role: 'assistant', content: got.content });
    }
    // The cluster overview counts unit tails from the plane's records: the API process writes none itself, and
    // each turn's prefill-half unit was in the plane before its decode half found it.
    const response = await fetch(`${api.url}/admin/stats/overview`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(response.status).toBe(200);
    const { overview } = (await response.json()) as OverviewResponse;
    expect(overview.storage.tails.blocks).toBeGreaterThanOrEqual(3);
    expect(overview.storage.tails.blocks).toBeLessThan(overview.storage.blocks);
    expect(overview.storage.tails.bytes).toBeGreaterThan(0);
  }, 300_000);
});
