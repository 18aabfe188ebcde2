/**
 * Typed calls to llama.cpp's reference ops (llamacpp-reference.mjs), answered
 * by this test process's llama.cpp server (llamacpp-server.ts): node-llama-cpp
 * cannot run inside vitest workers.
 */
import { llamaCall } from './llamacpp-server.ts';

export type LlamaKvType = 'f16' | 'f32';

interface BaseRequest {
  modelPath: string;
  threads?: number;
  kvType?: LlamaKvType;
}

function call<T>(request: object, timeoutMs = 600_000): Promise<T> {
  return llamaCall<T>('reference', request, timeoutMs);
}

/**
 * Last-position log-probabilities (raw logits minus their logsumexp), one per
 * vocab entry; `null` where llama.cpp's f32 probability underflowed to 0.
 */
export async function llamaLogprobs(req: BaseRequest & { tokens: number[] }): Promise<(number | null)[]> {
  return (await call<{ logprobs: (number | null)[] }>({ op: 'logits', ...req })).logprobs;
}

/** Like llamaLogprobs for several prompts, with one model load. */
export async function llamaLogprobsMany(req: BaseRequest & { prompts: number[][] }): Promise<(number | null)[][]> {
  return (await call<{ logprobs: (number | null)[][] }>({ op: 'logitsMany', ...req })).logprobs;
}

/** Greedy continuation; margins[i] = logit gap between llama.cpp's top two tokens at step i. */
export async function llamaGreedy(
  req: BaseRequest & { tokens: number[]; nPredict: number },
): Promise<{ tokens: number[]; margins: number[] }> {
  return await call({ op: 'greedy', ...req });
}

export type LlamaBatchRequest =
  | (BaseRequest & { op: 'logitsMany'; prompts: number[][] })
  | (BaseRequest & { op: 'greedy'; tokens: number[]; nPredict: number });

/**
 * Several logitsMany / greedy requests (any models) in one reference process:
 * llama.cpp's initialisation (~3 s) is paid once. Answers in request order.
 */
export async function llamaBatch(requests: LlamaBatchRequest[]): Promise<Array<{ logprobs?: (number | null)[][]; tokens?: number[]; margins?: number[] }>> {
  return (await call<{ results: Array<{ logprobs?: (number | null)[][]; tokens?: number[]; margins?: number[] }> }>({ op: 'batch', requests })).results;
}

export interface LlamaBench {
  prefillMs: number;
  /** CPU time of the reference process (all its threads) during the prefill. */
  prefillCpuMs: number;
  decodeMs: number;
  prefillTps: number;
  decodeTps: number;
  threads: number;
}

export async function llamaBench(req: BaseRequest & { tokens: number[]; nPredict: number }): Promise<LlamaBench> {
  return await call({ op: 'bench', ...req });
}
