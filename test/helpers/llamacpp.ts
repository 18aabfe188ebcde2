/**
 * Typed wrapper around test/helpers/llamacpp-reference.mjs: spawns it as a
 * separate node process (node-llama-cpp cannot run inside vitest workers),
 * writes one JSON request to its stdin and parses its JSON answer.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';

import { llamaCppEnv } from './llamacpp-env.ts';

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'llamacpp-reference.mjs');

export type LlamaKvType = 'f16' | 'f32';

interface BaseRequest {
  modelPath: string;
  threads?: number;
  kvType?: LlamaKvType;
}

async function call<T>(request: object, timeoutMs = 600_000): Promise<T> {
  return await new Promise<T>((resolve, reject) => {
    const child = spawn(process.execPath, [SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'], env: llamaCppEnv() });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`llama.cpp reference timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const text = Buffer.concat(out).toString('utf8');
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        reject(new Error(`llama.cpp reference exited ${code} with no JSON; stderr: ${Buffer.concat(err).toString('utf8').slice(-2000)}`));
        return;
      }
      const obj = parsed as { error?: string };
      if (code !== 0 || obj.error) {
        reject(new Error(`llama.cpp reference failed (exit ${code}): ${obj.error ?? text.slice(0, 2000)}`));
        return;
      }
      resolve(parsed as T);
    });
    child.stdin.end(JSON.stringify(request));
  });
}

export async function llamaTokenize(modelPath: string, text: string): Promise<number[]> {
  return (await call<{ tokens: number[] }>({ op: 'tokenize', modelPath, text })).tokens;
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
