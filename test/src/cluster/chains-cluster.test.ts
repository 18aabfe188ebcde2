/**
 * Conversations end to end on a real Redis Cluster (3 primaries + 3 replicas, KVTIER_REDIS_CLUSTER,
 * a 4-shard metadata plane): two `kvtier serve` API processes and two `kvtier worker` processes on
 * one S3 store (the test S3 server). Every turn waits for the workers' block writes to land, so
 * whichever worker runs the next turn finds the history's blocks through the shared plane and store.
 *
 * - A Responses chain: each turn continues the one before by `previous_response_id`, created
 *   through the other API process (the stored response crosses processes through the cluster).
 * - An agent tool loop (chat completions with tools and tool results), its turns dealt round-robin
 *   to the two workers, once through one API process and once alternating the two API processes
 *   turn by turn. From turn 2 on: wholeBlocks(previous prompt) ≤ cached ≤ prompt, and cached grows.
 *   The alternating loop needs the reply memory in Redis (src/serve/redis-reply-memory.ts): the
 *   synthetic model's replies do not re-encode to the ids sampled, so a process splicing only its
 *   own replies' ids built a prompt that differs from the reply on (before: step 3, 1024 cached of
 *   1192, previous prompt 1122).
 * And no command raised CROSSSLOT on any node.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startCephS3, type CephS3 } from '../../helpers/ceph-s3.ts';
import { startRedisCluster, type RedisClusterFixture } from '../../helpers/redis-cluster.ts';
import { startWorker, type WorkerProcess } from '../workers/processes.ts';
import { ADMIN_TOKEN, killTree, startServe, type ServeProcess } from './cluster-processes.ts';
import { writesLanded } from './writes-landed.ts';

const MODEL = 'synthetic:tiny';
const API_KEY = 'sk-chains';
const BLOCK = 64;
const INSTRUCTIONS = 'You are the release agent of a storage team. Check each step, answer in one short line. '.repeat(10);
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file of the repository', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'run_tests', description: 'Run the test suite', parameters: { type: 'object', properties: { filter: { type: 'string' } } } } },
];
const LOG = Array.from({ length: 2 }, (_, line) => `FAIL test/step.test.ts > case ${line}: expected 200, got 503`).join('\n');
const wholeBlocks = (tokens: number) => Math.floor(tokens / BLOCK) * BLOCK;

let cluster: RedisClusterFixture;
let crossSlotBefore = 0;
let ceph: CephS3;
const apis: ServeProcess[] = [];
const workers: WorkerProcess[] = [];
const clients: OpenAI[] = [];
const landed = () => writesLanded(apis[0].url, ADMIN_TOKEN, workers.length);

beforeAll(async () => {
  cluster = await startRedisCluster();
  crossSlotBefore = cluster.crossSlotErrors();
  ceph = await startCephS3();
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-chains-cluster-'));
  const keysFile = join(dir, 'keys.txt');
  writeFileSync(keysFile, `${API_KEY} chains\n`);
  const env = {
    KVTIER_REDIS_CLUSTER: cluster.spec,
    KVTIER_PLANE_SHARDS: '4',
    KVTIER_STORAGE: `s3://kvtier-chains/blocks?endpoint=${ceph.endpoint}&region=${ceph.region}&forcePathStyle=true&createBucket=true`,
    AWS_ACCESS_KEY_ID: ceph.accessKeyId,
    AWS_SECRET_ACCESS_KEY: ceph.secretAccessKey,
    // API processes that share a cache share the server secret (tenant salts).
    KVTIER_SECRET: 'chains-cluster-test-secret',
    KVTIER_API_KEYS: keysFile,
  };
  // Round-robin dispatch: consecutive turns run on different workers, so each finds the history through the plane and S3.
  for (let a = 0; a < 2; a++) apis.push(await startServe({ ...env, KVTIER_DISPATCH: 'roundrobin', KVTIER_REQUEST_TIMEOUT_MS: '120000' }));
  for (let w = 0; w < 2; w++) workers.push(await startWorker({ ...env, KVTIER_MODEL: MODEL, KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), `kvtier-chains-worker-${w}-`)) }));
  for (const api of apis) clients.push(new OpenAI({ baseURL: `${api.url}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 120_000 }));
}, 300_000);

afterAll(async () => {
  for (const api of apis) await api.stop();
  for (const worker of workers) if (worker.child.pid) killTree(worker.child.pid);
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await cluster?.stop();
  await ceph?.stop();
});

describe('2 API processes + 2 workers on a Redis Cluster (4-shard plane) and S3', () => {
  it('a Responses chain continues by previous_response_id through the other API process each turn, its cache covering the turn before', async () => {
    let previous = await clients[0].responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'Turn 1: is the release branch green?', max_output_tokens: 8, temperature: 0 });
    // 8 output tokens end a reply early: `incomplete` (max_output_tokens) is a finished turn too.
    expect(previous.error).toBeNull();
    expect(previous.output_text.length).toBeGreaterThan(0);
    for (let turn = 2; turn <= 5; turn++) {
      await landed();
      const api = (turn - 1) % 2;
      // The stored response is read by the process that did not write it.
      expect((await clients[api].responses.retrieve(previous.id)).output_text).toBe(previous.output_text);
      const next = await clients[api].responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: `Turn ${turn}: and the next step?`, previous_response_id: previous.id, max_output_tokens: 8, temperature: 0 });
      expect(next.error).toBeNull();
      // The chain carried the previous turn's whole conversation (its input and its reply) into this one.
      expect(next.usage!.input_tokens, `turn ${turn}`).toBeGreaterThan(previous.usage!.input_tokens + previous.usage!.output_tokens);
      expect(next.usage!.input_tokens_details.cached_tokens, `turn ${turn}`).toBeGreaterThanOrEqual(wholeBlocks(previous.usage!.input_tokens));
      previous = next;
    }
  }, 300_000);

  it('an agent tool loop through one API process: cached tokens grow each turn and cover the previous prompt’s whole blocks', async () => {
    await toolLoop('one', 100, () => 0);
  }, 300_000);

  it('an agent tool loop whose turns alternate API processes: each turn’s cache covers the previous prompt’s whole blocks', async () => {
    // The process serving a turn did not serve the turn before: it splices that reply's sampled ids from the
    // cluster's reply memory (Redis), not its own.
    await toolLoop('alternating', 200, (step) => step % 2);
  }, 300_000);

  it('no command raised CROSSSLOT on any node', () => {
    expect(cluster.crossSlotErrors() - crossSlotBefore).toBe(0);
  });
});

/**
 * An agent's tool loop of 6 steps, step n sent through API process apiOf(n), sampled at temperature 1
 * with seed `seed + n`, so each step's reply is new text: a process that did not serve the step before
 * has not seen its reply. Odd steps must call a tool (tool_choice "required": the grammar makes the
 * synthetic model write a real tool call, answered by a tool result); even steps answer in text (a tool
 * call's text comes back re-rendered by the template, so only text replies are spliced from the reply
 * memory, and they are what an alternating process can get wrong). From step 2 on it asserts,
 * with P the previous step's prompt_tokens: wholeBlocks(P) ≤ cached_tokens ≤ prompt_tokens (the cache
 * covers the previous prompt but at most its last partial 64-token block), and cached_tokens grows.
 */
async function toolLoop(name: string, seed: number, apiOf: (step: number) => number): Promise<void> {
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: INSTRUCTIONS },
    { role: 'user', content: `The nightly build of ${name} is red; find out why and fix it.` },
  ];
  let previousPrompt = 0;
  let previousCached = -1;
  for (let step = 1; step <= 6; step++) {
    const response = await clients[apiOf(step)].chat.completions.create({ model: MODEL, messages, tools: TOOLS, ...(step % 2 === 1 ? { tool_choice: 'required', max_tokens: 64 } : { max_tokens: 16 }), temperature: 1, seed: seed + step });
    const usage = response.usage!;
    const cached = usage.prompt_tokens_details!.cached_tokens!;
    const what = `${name}, step ${step}: ${cached} cached of ${usage.prompt_tokens} (previous prompt ${previousPrompt})`;
    if (step % 2 === 1) expect(response.choices[0].message.tool_calls?.length, what).toBeGreaterThan(0);
    if (step > 1) {
      expect(cached, what).toBeGreaterThanOrEqual(wholeBlocks(previousPrompt));
      expect(cached, what).toBeLessThanOrEqual(usage.prompt_tokens);
      expect(cached, what).toBeGreaterThan(previousCached);
    }
    previousPrompt = usage.prompt_tokens;
    previousCached = cached;
    // The agent echoes the assistant turn as returned, a result for each tool call it made, and its next instruction.
    const reply = response.choices[0].message;
    const assistant: OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam = { role: 'assistant', content: reply.content ?? '' };
    if (reply.tool_calls) assistant.tool_calls = reply.tool_calls;
    messages.push(assistant);
    for (const call of reply.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: `{"ok": false, "failing": "test/step-${step}.test.ts"}` });
    // A log of more than a block after each text reply: a reply spliced differently is not hidden in the prompt's last partial block.
    messages.push({ role: 'user', content: `Step ${step + 1}: tool output attached, exit status 1 in test/step-${step}.test.ts. Keep going.${step % 2 === 0 ? `\n${LOG}` : ''}` });
    await landed();
  }
}
