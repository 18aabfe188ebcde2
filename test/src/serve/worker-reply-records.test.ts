/**
 * A worker's reply-memory records (src/recipe/sampled-replies.ts, from the sampled ids alone) and the
 * API's (src/serve/generation.ts, from its streamed state) agree: for a chat route the same replies,
 * for a raw completion a subset of the worker's, so the API may skip its own write whenever the worker
 * wrote them. Every record is its text's ids.
 */
import { describe, expect, it } from 'vitest';

import { ensureGptOssModel } from '../../../inference-core/synthetic/gptoss-synthetic.ts';
import { promptCodecFromGgufFile, sampledRepliesOfIds, type PromptCodec, type SampledReply } from '../../../src/recipe/index.ts';
import { Generation } from '../../../src/serve/generation.ts';
import { ServeMetrics } from '../../../src/serve/metrics.ts';
import type { RequestSpec } from '../../../src/request-spec.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';
import { buildRealVocabGguf } from '../../helpers/real-vocab-gguf.ts';

function spec(prompt: Uint32Array): RequestSpec {
  return { id: 'j', model: 'm', tenant: 't', tenantSalt: 'ab', trafficClass: 'default', tokens: prompt, sampling: { maxTokens: 64, temperature: 0, topP: 1, topK: 0, seed: 1, stopTokenIds: [] }, submittedAt: 0 };
}

/** The API's side: the job's events through a Generation, as InferenceService feeds them. */
function apiSampled(codec: PromptCodec, job: RequestSpec, completionIds: number[], splitReasoning: boolean): SampledReply[] {
  const generation = new Generation(job, { route: 'test', parseToolCalls: true, splitReasoning }, codec, new ServeMetrics());
  generation.accept({ type: 'prefilled', promptTokens: job.tokens.length, cachedTokens: 0, storedPromptTokens: 0, queueMs: 0, lookupMs: 0, loadMs: 0, prefillMs: 0 });
  // one id per event, as a decode loop streams them
  for (const id of completionIds) generation.accept({ type: 'tokens', ids: [id] });
  generation.accept({ type: 'done', finishReason: 'stop', completionTokens: completionIds.length, workerMs: 1, decodeTokens: completionIds.length, prefillTokens: job.tokens.length });
  const end = generation.finish().find((e) => e.type === 'end');
  if (end?.type !== 'end') throw new Error('no end event');
  return end.sampled;
}

function agree(codec: PromptCodec, prompt: string, reply: number[]): SampledReply[] {
  const job = spec(codec.encode(prompt));
  const worker = sampledRepliesOfIds(codec, job, reply);
  const call = codec.harmony?.callTokenId;
  for (const record of worker) {
    // harmony's call form: the raw reply's ids, then the <|call|> id for its closing <|call|>
    if (call !== undefined && record.ids.at(-1) === call) expect(codec.decode(record.ids.slice(0, -1)) + '<|call|>').toBe(record.text);
    else expect(codec.decode(record.ids)).toBe(record.text);
  }
  expect(worker).toEqual(apiSampled(codec, job, reply, true));
  const raw = apiSampled(codec, job, reply, false);
  for (const record of raw) expect(worker).toContainEqual(record);
  return worker;
}

describe("a worker's reply-memory records equal the API's", () => {
  const qwen = promptCodecFromGgufFile(buildRealVocabGguf('qwen3'));
  const stop = qwen.stopTokenIds[0];

  it('a plain reply, a reply that opens a think block, and one after a prompt that opened it (Qwen3 vocabulary)', () => {
    const plain = agree(qwen, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', [...qwen.encode('Hello — ünïcödé!'), stop]);
    expect(plain.map((r) => r.text)).toEqual(['Hello — ünïcödé!']);
    const opened = agree(qwen, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', [...qwen.encode('<think>\nGreet them.\n</think>\n\nHello!'), stop]);
    expect(opened.map((r) => r.text)).toEqual(['<think>\nGreet them.\n</think>\n\nHello!', 'Hello!']);
    const inside = agree(qwen, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n', [...qwen.encode('Greet them.\n</think>\n\nHello!'), stop]);
    expect(inside.map((r) => r.text)).toEqual(['Greet them.\n</think>\n\nHello!', 'Hello!']);
    // cut by max_tokens (no stop id) and inside the block still: the raw text alone
    expect(agree(qwen, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', [...qwen.encode('<think>\nStill thinking')]).map((r) => r.text)).toEqual(['<think>\nStill thinking']);
    expect(agree(qwen, 'x', [stop])).toEqual([]);
  });

  it('a harmony reply, and a tool call that ended on <|call|> (gpt-oss vocabulary)', () => {
    const gptoss = promptCodecFromGgufFile(ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR, vocab: 'o200k-harmony' }));
    const call = gptoss.harmony!.callTokenId;
    const prompt = '<|start|>user<|message|>weather?<|end|><|start|>assistant';
    const answered = agree(gptoss, prompt, [...gptoss.encode('<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.'), gptoss.stopTokenIds[0]]);
    expect(answered.length).toBeGreaterThan(0);
    const called = agree(gptoss, prompt, [...gptoss.encode('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}'), call]);
    expect(called.at(-1)?.text.endsWith('<|call|>')).toBe(true);
  });
});
