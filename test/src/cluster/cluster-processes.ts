/**
 * Real kvtier processes for the cluster tests: `kvtier serve` (embedded or
 * with REDIS_URL) and a chat client that plays agent sessions against it.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

import { fixtureDir } from '../../helpers/fixture-dirs.ts';
import { type WorkerProcess } from '../workers/processes.ts';

const ROOT = new URL('../../../', import.meta.url).pathname;
export const ADMIN_TOKEN = 'cluster-test-admin';

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  output: () => string;
  stop(): Promise<void>;
}

/** A `kvtier serve` process on a port it binds itself (PORT=0, read back from its ready line), so no other process can take it first. */
export async function startServe(env: Record<string, string>): Promise<ServeProcess> {
  const child = spawn(process.execPath, [join(ROOT, 'bin/kvtier.js'), 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      KVTIER_THREADS: '1',
      // The tiny test model prefills a block faster than a loaded machine reads one, so the default
      // fetch-or-recompute would (rightly) recompute hits; these tests claim loads. prefill-scheduler.test covers auto.
      KVTIER_FETCH: 'load',
      KVTIER_MODEL: 'synthetic:tiny',
      KVTIER_ADMIN_TOKEN: ADMIN_TOKEN,
      KVTIER_LOG_LEVEL: 'warn',
      KVTIER_DATA_DIR: fixtureDir('kvtier-serve-'),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    // An upper bound only (the ready line ends the wait): several processes may start at once on a loaded machine.
    const timer = setTimeout(() => reject(new Error(`kvtier serve not ready in 180 s:\n${output}`)), 180_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const ready = /kvtier serving .* on (http:\/\/\S+) \(/.exec(output);
      if (ready) clearTimeout(timer), resolve(ready[1]);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`kvtier serve exited (${code}):\n${output}`))));
  });
  return {
    url,
    child,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => (clearTimeout(timer), resolve()));
        child.kill('SIGTERM');
      }),
  };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface TurnResult {
  content: string;
  promptTokens: number;
  cachedTokens: number;
  finishReason: string;
}

export async function chat(url: string, messages: ChatMessage[], maxTokens: number, temperature = 0, seed = 7, model = 'synthetic:tiny'): Promise<TurnResult> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-kvtier-class': 'agent' },
    body: JSON.stringify({ model, messages, max_tokens: maxTokens, temperature, seed }),
  });
  const body = (await response.json()) as {
    choices?: Array<{ message: { content: string }; finish_reason: string }>;
    usage?: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    error?: unknown;
  };
  if (!response.ok || !body.choices) throw new Error(`chat failed ${response.status}: ${JSON.stringify(body)}`);
  return {
    content: body.choices[0].message.content,
    promptTokens: body.usage!.prompt_tokens,
    cachedTokens: body.usage!.prompt_tokens_details.cached_tokens,
    finishReason: body.choices[0].finish_reason,
  };
}

/** Agent sessions: a long shared-looking system prompt per session, then tool-result-like user turns. */
export function sessionSystem(session: number): string {
  return `Agent ${session}: you operate a build system. Follow the plan, call tools, report briefly. `.repeat(12);
}

export function userTurn(session: number, turn: number): string {
  return `Tool result ${turn} for agent ${session}: exit status 0, ${turn * 17 + session} files changed. Next step?`;
}

/** Streams a chat reply (SSE); `onFirstContent` fires once, at the first content delta. */
export async function chatStream(
  url: string,
  messages: ChatMessage[],
  maxTokens: number,
  temperature: number,
  onFirstContent: () => void,
  model = 'synthetic:tiny',
  seed = 7,
): Promise<{ content: string; finishReason: string; promptTokens?: number; cachedTokens?: number }> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-kvtier-class': 'agent' },
    body: JSON.stringify({ model, messages, max_tokens: maxTokens, temperature, seed, stream: true, stream_options: { include_usage: true } }),
  });
  if (!response.ok || !response.body) throw new Error(`stream failed ${response.status}: ${await response.text()}`);
  let content = '';
  let finishReason = '';
  let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } } | undefined;
  let buffered = '';
  let first = true;
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n\n')) !== -1) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event.split('\n').find((line) => line.startsWith('data: '))?.slice(6);
      if (!data || data === '[DONE]') continue;
      const parsed = JSON.parse(data) as {
        choices?: Array<{ delta?: { content?: string }; finish_reason?: string | null }>;
        usage?: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } } | null;
        error?: unknown;
      };
      if (parsed.error) throw new Error(`stream error: ${JSON.stringify(parsed.error)}`);
      if (parsed.usage) usage = parsed.usage;
      const choice = parsed.choices?.[0];
      if (choice?.delta?.content) {
        content += choice.delta.content;
        if (first) (first = false), onFirstContent();
      }
      if (choice?.finish_reason) finishReason = choice.finish_reason;
    }
  }
  return { content, finishReason, promptTokens: usage?.prompt_tokens, cachedTokens: usage?.prompt_tokens_details?.cached_tokens };
}

/**
 * SIGKILL a process and its descendants, at once: a process started through a
 * wrapper (tsx's CLI) would leave its child running if only the wrapper died.
 */
export function killTree(pid: number): void {
  let children: number[] = [];
  try {
    children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    // pgrep exits 1 when there are no children.
  }
  for (const child of children) killTree(child);
  try {
    process.kill(pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** Stops the API processes in order, then kills every worker's whole process tree (see killTree) and waits for each to exit. */
export async function stopProcesses(apis: ReadonlyArray<ServeProcess | undefined>, workers: readonly WorkerProcess[]): Promise<void> {
  for (const api of apis) await api?.stop();
  for (const worker of workers) if (worker.child.pid) killTree(worker.child.pid);
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
}
