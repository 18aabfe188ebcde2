/**
 * One llama.cpp process per test process (llamacpp-server.mjs), started on
 * the first call and kept: with isolate: false a vitest fork keeps this module
 * from one test file to the next, so a fork pays llama.cpp's ~3 s start once
 * instead of once per reference call. Calls run one at a time, in order.
 *
 * The process is unref'd: it never keeps a test process alive, and it exits
 * when its stdin closes, that is when the test process ends, however it ends.
 * A call that times out kills it (the next call starts a new one); a process
 * that dies fails the call in flight with its stderr.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

import { llamaCppEnv } from './llamacpp-env.ts';

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'llamacpp-server.mjs');

export type LlamaKind = 'reference' | 'tokenize' | 'vocab-info';

interface Server {
  child: ChildProcessWithoutNullStreams;
  stderr: string;
  /** Set while a call waits for its answer. */
  waiting: { id: number; resolve: (result: unknown) => void; reject: (error: Error) => void } | null;
}

let server: Server | null = null;
let nextId = 0;
let tail: Promise<unknown> = Promise.resolve();

function start(): Server {
  const child = spawn(process.execPath, [SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'], env: llamaCppEnv() });
  const started: Server = { child, stderr: '', waiting: null };
  child.unref();
  for (const stream of [child.stdin, child.stdout, child.stderr] as Array<Readable | Writable>) (stream as unknown as { unref?: () => void }).unref?.();
  let pending = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      const message = JSON.parse(line) as { id: number; result?: unknown; error?: string };
      const waiting = started.waiting;
      if (!waiting || waiting.id !== message.id) throw new Error(`llama.cpp server answered id ${message.id}, no call waits for it`);
      started.waiting = null;
      if (message.error !== undefined) waiting.reject(new Error(`llama.cpp: ${message.error}`));
      else waiting.resolve(message.result);
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (started.stderr = (started.stderr + chunk).slice(-4000)));
  const lost = (why: string) => {
    if (server === started) server = null;
    started.waiting?.reject(new Error(`llama.cpp server ${why}; stderr: ${started.stderr}`));
    started.waiting = null;
  };
  child.on('error', (error) => lost(`failed: ${error.message}`));
  child.on('exit', (code, signal) => lost(`exited (${signal ?? code})`));
  return started;
}

function callNow<T>(kind: LlamaKind, request: object, timeoutMs: number): Promise<T> {
  server ??= start();
  const current = server;
  const id = nextId++;
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      current.waiting = null;
      if (server === current) server = null;
      current.child.kill('SIGKILL');
      reject(new Error(`llama.cpp ${kind} call timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    current.waiting = {
      id,
      resolve: (result) => (clearTimeout(timer), resolve(result as T)),
      reject: (error) => (clearTimeout(timer), reject(error)),
    };
    current.child.stdin.write(JSON.stringify({ id, kind, request }) + '\n');
  });
}

/** One request to this process's llama.cpp server, after every call made before it. */
export function llamaCall<T>(kind: LlamaKind, request: object, timeoutMs: number): Promise<T> {
  const answer = tail.then(() => callNow<T>(kind, request, timeoutMs));
  tail = answer.catch(() => undefined);
  return answer;
}
